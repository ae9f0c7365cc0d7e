// Hang reports: when a job stops, every rank of the communicator logs (WARN) what it waits
// for and where every other rank is, so that a rank that never made a call, or made another
// one, is named instead of guessed.
//
// Triggers: SIGUSR1 to any rank (every communicator of that process reports), or NCCL_TIMEOUT
// in an operation (that communicator reports, before the operation fails).
//
//   rank A (trigger) ── HangMsg{request, A's CallSnapshot} ──► every other rank's listener
//   each rank, on a request it has not seen: sends its own snapshot to every other rank,
//   asks its engine to log its lanes (collective, call number, channel, step, peer, bytes),
//   and once every rank answered (or after kAnswerWindowMs) logs every rank's state and the
//   findings (hangFindings).
//
// A signal handler may only write to a pipe; the watcher thread (one per process, started by
// the first communicator, sleeping in poll()) does the rest. Messages travel over the
// communicator's bootstrap (tagged messages handed to the watcher by the listener thread),
// so idle ranks answer too: they are the ones a hang is usually waiting for. SIGUSR1 is taken
// only if nobody handles it already (its default action kills the process).
#pragma once

#include <string>
#include <vector>

#include "src/trace/call_state.h"

struct ncclComm;

namespace ringcc {

// How long a rank waits for the others' answers before it logs without them.
inline constexpr int kAnswerWindowMs = 1500;
// How long an operation that timed out waits for its report before it fails: every live rank
// answers within milliseconds; the report of one that cannot (a partition) is concluded when
// the communicator is destroyed or at kAnswerWindowMs, whichever comes first.
inline constexpr int kTimeoutWaitMs = 300;

// One rank's answer to a report.
struct RankCall {
  bool answered = false;
  CallSnapshot call;
};

// "in call #5 AllReduce(1024 x float32, sum)", "not in a call; last call #4 ... (finished)",
// "did not answer".
std::string describeRankCall(const RankCall& r);

// What the answers show (pure): the rank that has not made the call the others wait in, ranks
// that made different calls under one number, ranks still in an earlier call, ranks that did
// not answer. Empty if the ranks agree and none waits.
std::vector<std::string> hangFindings(const std::vector<RankCall>& ranks);

}  // namespace ringcc
