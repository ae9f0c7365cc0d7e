// The pure half of the hang report: every rank's state in words, and what they show.
#include "src/trace/hang_report.h"

#include <algorithm>
#include <cstdio>

#include "src/plan/op_sig.h"

namespace ringcc {
namespace {

std::string callNumbers(const CallSnapshot& c) {
  return c.firstSeq == c.lastSeq
             ? "#" + std::to_string(c.lastSeq)
             : "#" + std::to_string(c.firstSeq) + "-#" + std::to_string(c.lastSeq);
}

std::string callText(const CallSnapshot& c) {
  if (c.lastSeq == 0) return "no call yet";
  if (c.sig.coll == kSigGroup) return "call " + callNumbers(c) + " (a group of calls)";
  return "call " + callNumbers(c) + " " + describeCall(c.sig);
}

std::string rankList(const std::vector<int>& ranks) {
  std::string t = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) t += (i ? "," : "") + std::to_string(ranks[i]);
  return t;
}

}  // namespace

std::string describeRankCall(const RankCall& r) {
  if (!r.answered) return "did not answer (dead, stopped, or unreachable)";
  if (r.call.inCall) return "in " + callText(r.call);
  if (r.call.lastSeq == 0) return "not in a call; has made no call yet";
  return "not in a call; last " + callText(r.call) + " finished";
}

std::vector<std::string> hangFindings(const std::vector<RankCall>& ranks) {
  std::vector<std::string> out;
  const int n = static_cast<int>(ranks.size());
  // The call the furthest waiting ranks are in: what everyone else is measured against.
  const RankCall* lead = nullptr;
  for (const RankCall& r : ranks)
    if (r.answered && r.call.inCall && (!lead || r.call.lastSeq > lead->call.lastSeq)) lead = &r;
  std::vector<int> silent;
  for (int r = 0; r < n; ++r)
    if (!ranks[r].answered) silent.push_back(r);
  if (!silent.empty())
    out.push_back(rankList(silent) + " did not answer: dead, stopped or unreachable");
  if (lead == nullptr) {
    uint64_t lo = UINT64_MAX, hi = 0;
    for (const RankCall& r : ranks)
      if (r.answered) lo = std::min(lo, r.call.lastSeq), hi = std::max(hi, r.call.lastSeq);
    if (hi > lo) {
      std::vector<int> behind;
      for (int r = 0; r < n; ++r)
        if (ranks[r].answered && ranks[r].call.lastSeq < hi) behind.push_back(r);
      out.push_back("no rank is in a call, but " + rankList(behind) + " made fewer calls (" +
                    std::to_string(lo) + ") than others (" + std::to_string(hi) + ")");
    }
    return out;
  }
  const CallSnapshot& target = lead->call;
  std::vector<int> waiting;
  for (int r = 0; r < n; ++r)
    if (ranks[r].answered && ranks[r].call.inCall && ranks[r].call.lastSeq == target.lastSeq)
      waiting.push_back(r);
  const std::string waitText =
      rankList(waiting) + (waiting.size() == 1 ? " waits" : " wait") + " in " + callText(target);
  for (int r = 0; r < n; ++r) {
    const RankCall& rc = ranks[r];
    if (!rc.answered) continue;
    const CallSnapshot& c = rc.call;
    if (c.inCall && c.lastSeq == target.lastSeq) {
      if (c.sig.coll != kSigGroup && target.sig.coll != kSigGroup && !sameSig(c.sig, target.sig))
        out.push_back("rank " + std::to_string(r) + " made another call under the same number: " +
                      callText(c) + ", while " + rankList({static_cast<int>(lead - &ranks[0])}) +
                      " is in " + callText(target));
    } else if (c.inCall) {
      out.push_back("rank " + std::to_string(r) + " is still in an earlier " + callText(c) +
                    " while " + waitText);
    } else if (c.lastSeq < target.firstSeq) {
      out.push_back(
          "rank " + std::to_string(r) + " has not called #" + std::to_string(target.firstSeq) +
          " (its last call: " + (c.lastSeq ? callText(c) + ", finished" : std::string("none")) +
          "); " + waitText);
    } else {
      out.push_back("rank " + std::to_string(r) + " finished " + callText(c) + " and left while " +
                    waitText + " (it may have failed: see its log)");
    }
  }
  return out;
}

}  // namespace ringcc
