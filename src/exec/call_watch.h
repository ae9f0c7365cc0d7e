// Mismatched calls found through the bootstrap, where no connection can carry a signature.
//
// Ranks check each other's calls on their connections (the signature beside each slot, and
// the call a stuck side posts in FifoControl). That needs a connection between them. When two
// ranks make calls whose Programs use different connections (one all-reduce by Tree or
// Doubling on point-to-point ports, the other a ring collective), the rank that makes the new
// connection waits for a connection info its peer will never send, and the peer waits on a
// ring connection the first rank never uses: neither has a connection to look at.
//
// So a rank that is about to wait for new connections tells each peer it waits on which call
// it is in (batch number and OpSig), as a bootstrap message; a handler on the listener thread
// keeps the last call each peer told. While this rank expects a call (it is making connections
// for it, or it is stuck in it), a peer's call with the same batch number and another
// signature is a mismatch: the handler sets the stop flag that the connection wait polls, and
// the engine names both calls. A stuck engine that finds one tells that peer its own call too,
// so that a peer still waiting for connection infos stops as well.
//
// The messages go out only when connections are made or a batch is stuck: nothing on the
// path of an operation that runs.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "kernels/connector_device.h"
#include "nccl.h"

namespace ringcc {

class Bootstrap;

class CallWatch {
 public:
  // Registers the bootstrap handler; the watch must be destroyed before `bootstrap`.
  explicit CallWatch(Bootstrap& bootstrap);
  ~CallWatch();
  CallWatch(const CallWatch&) = delete;
  CallWatch& operator=(const CallWatch&) = delete;

  // The flag a wait for connection infos polls: set by stopAll() and when a mismatch is found.
  const std::atomic<bool>* stopFlag() const;
  // Sets the stop flag for good (abort, revoke): rearm() keeps it set.
  void stopAll();
  // A new batch: forgets the expected call and a mismatch found for an earlier batch, and
  // clears the stop flag unless stopAll() was called. Nothing to do (no lock taken) unless
  // expect() was called since the last rearm: it runs on every batch.
  void rearm();

  // This rank is in batch `seq`, call `sig`: peers' calls under the same number are compared
  // with it from now on (also those told before). A group (kSigGroup) is never compared.
  void expect(uint64_t seq, const OpSig& sig);
  // Tells `peer` that this rank is in batch `seq`, call `sig`. A failure is returned but not
  // recorded as the communicator's error (telling is best effort).
  ncclResult_t tell(int peer, uint64_t seq, const OpSig& sig);
  // The first peer found in another call than the expected one, and that call; false if none.
  bool mismatch(int* peer, OpSig* theirs) const;

 private:
  struct State;
  Bootstrap& bootstrap_;
  bool armed_ = false;  // expect() called since the last rearm() (the engine thread's only)
  // Shared with the handler: a handler that runs on while the watch is destroyed still finds
  // its state.
  std::shared_ptr<State> state_;
};

}  // namespace ringcc
