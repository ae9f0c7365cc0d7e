#include "src/exec/call_watch.h"

#include <cstring>
#include <mutex>
#include <vector>

#include "src/base/error.h"
#include "src/bootstrap/bootstrap.h"

namespace ringcc {
namespace {

// -1: sub-groups, -2: hang reports.
constexpr int kTagToldCall = kBootstrapReservedTag - 3;

// A live peer takes a message at once; one that has left is retried only this long (the
// bootstrap retries a refused connection until its deadline).
constexpr int64_t kTellTimeoutMs = 200;

struct ToldCall {
  uint64_t seq;  // the teller's batch number; 0: nothing told yet
  OpSig sig;
};
static_assert(sizeof(ToldCall) == 24, "the wire form is the struct itself");

}  // namespace

struct CallWatch::State {
  std::atomic<bool> stop{false};
  std::atomic<bool> stopped{false};  // stopAll() was called: rearm() keeps `stop` set
  std::mutex mu;                     // guards the rest
  std::vector<ToldCall> told;        // by rank: the last call each peer told
  ToldCall expected{};               // this rank's call, seq 0 while none
  int foundPeer = -1;                // the first peer found in another call ...
  OpSig foundSig{};                  // ... and its call

  // Compares peer's call with the expected one and records a mismatch. Caller holds mu.
  void compare(int peer) {
    const ToldCall& t = told[peer];
    if (foundPeer >= 0 || expected.seq == 0 || t.seq != expected.seq) return;
    if (t.sig.coll == kSigGroup || expected.sig.coll == kSigGroup) return;
    if (sameSig(t.sig, expected.sig)) return;
    foundPeer = peer;
    foundSig = t.sig;
    stop.store(true);
  }
};

CallWatch::CallWatch(Bootstrap& bootstrap)
    : bootstrap_(bootstrap), state_(std::make_shared<State>()) {
  state_->told.assign(bootstrap.nranks(), ToldCall{});
  std::shared_ptr<State> s = state_;
  bootstrap_.onMessage(kTagToldCall, [s](int from, const std::vector<char>& data) {
    // From an authenticated peer (the bootstrap checked the job's secret), but checked anyway.
    if (data.size() != sizeof(ToldCall) || from < 0 || from >= static_cast<int>(s->told.size()))
      return;
    std::lock_guard<std::mutex> lock(s->mu);
    std::memcpy(&s->told[from], data.data(), sizeof(ToldCall));
    s->compare(from);
  });
}

CallWatch::~CallWatch() { bootstrap_.onMessage(kTagToldCall, nullptr); }

const std::atomic<bool>* CallWatch::stopFlag() const { return &state_->stop; }

void CallWatch::stopAll() {
  state_->stopped.store(true);
  state_->stop.store(true);
}

void CallWatch::rearm() {
  // The stop flag is set only by stopAll() (kept anyway) or by a mismatch with an expected
  // call: with nothing expected since the last rearm there is nothing to clear.
  if (!armed_) return;
  armed_ = false;
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->expected = ToldCall{};
  state_->foundPeer = -1;
  // Cleared first, then set again if stopAll() came meanwhile (it sets `stopped` first).
  state_->stop.store(false);
  if (state_->stopped.load()) state_->stop.store(true);
}

void CallWatch::expect(uint64_t seq, const OpSig& sig) {
  armed_ = true;
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->expected = ToldCall{seq, sig};
  for (int peer = 0; peer < static_cast<int>(state_->told.size()); ++peer) state_->compare(peer);
}

ncclResult_t CallWatch::tell(int peer, uint64_t seq, const OpSig& sig) {
  // A peer that has already left cannot be told, and that is not the cause the operation
  // fails with: the failure stays out of the communicator's and the thread's error (its WARN
  // still shows).
  struct Unrecorded : ErrorScope {
    void onError(const ErrorCause&) override {}
  } unrecorded;
  const ErrorCause before = lastError();
  const ToldCall call{seq, sig};
  const ncclResult_t rc = bootstrap_.send(peer, kTagToldCall, &call, sizeof(call), kTellTimeoutMs);
  if (rc != ncclSuccess) adoptError(before);  // the thread's last error stays what it was
  return rc;
}

bool CallWatch::mismatch(int* peer, OpSig* theirs) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->foundPeer < 0) return false;
  *peer = state_->foundPeer;
  *theirs = state_->foundSig;
  return true;
}

}  // namespace ringcc
