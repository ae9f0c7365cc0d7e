// One side of one UCX connection: its FIFO memory and the state machine that the proxy
// drives (transports/ucx/ucx_transport.h explains the protocol).
//
// Receive side: the FIFO the runner polls (counters, sizes, Simple slots) is ours. For each
// free slot a tagged receive is posted straight into it (tag: data, our link id, step), and
// one for its SlotMeta (size and the sender's call signature) into FifoControl::meta (tag:
// meta); when both completed, in step order, tail moves. When the runner moves head, the new
// head goes back to the sender as a credit message.
// Send side: a local FIFO of the same geometry that the runner fills as if it were the
// receiver's. Each slot the runner publishes (tail) is sent from the slot itself, or from the
// user's buffer its SlotRef names (our refKind is kRefNetwork), (tag: data, the receiver's
// link id, step), its SlotMeta beside it (tag: meta), at most nSlots steps beyond the
// receiver's credited head (it has a receive posted for each of those). head moves to our
// first send UCX has not finished with, so the runner never overwrites a slot in flight nor
// changes a referenced buffer before it left, and never waits for a credit's round trip
// itself. Both: a posted receive for the peer's close message, and an endpoint
// whose failure (peer died, link down) UCX reports through the error handler. peerState() reads
// atomics only.
//
// Threads: construction and the setters on the caller's thread before the proxy sees the
// link; everything else on the proxy thread; peerState() anywhere.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "kernels/connector_device.h"
#include "nccl.h"
#include "transports/host_mapped.h"
#include "transports/transport.h"

namespace ringcc {

class UcxWorker;

class UcxLink {
 public:
  // Allocates the FIFO (zeroed) for spec's geometry; LL memory never (see ucx_transport.h).
  UcxLink(UcxWorker* worker, ConnSide side, const ConnSpec& spec);
  ~UcxLink();  // frees the memory; UCX resources must be released first (release())
  UcxLink(const UcxLink&) = delete;
  UcxLink& operator=(const UcxLink&) = delete;

  bool valid() const { return block_ != nullptr; }
  // A CUDA rank's side: registers the FIFO for its kernels (transports/host_mapped.h), which
  // then publish into host memory that the proxy moves; view() gives device addresses and no
  // doorbell (a kernel cannot ring it: the proxy watches such links itself, transports/proxy).
  ncclResult_t mapForKernels(const ConnSpec& spec);
  // Ends that registration once the kernels are done (the Connector's destruction: the link
  // itself may live on in the proxy while UCX finishes with it).
  void unmapForKernels() { device_ = HostMapping(); }
  bool fedByDevice() const { return device_.mapped(); }
  FifoControl* hostControl() const { return control_; }
  ConnectorView view() const;
  uint32_t id() const { return id_; }
  int peerRank() const { return peerRank_; }
  ConnSide side() const { return side_; }

  // From the peer's info, before the proxy sees the link.
  void setPeer(uint32_t peerId, std::vector<uint8_t> address);

  // Proxy thread: moves what can move now. An error is logged (with the peer's rank) and
  // returned once; peerState() reports Dead from then on.
  ncclResult_t progress(bool* moved);

  PeerState peerState() const;

  // Any thread: true once every slot the runner published has been sent and UCX has finished
  // with it (send side; always true on the receive side), or the peer is gone. A Connector
  // waits for it (bounded) before it closes, so that data of a finished operation is not cut
  // off by a process that destroys its communicator and exits at once.
  bool drained() const;
  // Send side: the slots the peer has consumed (and UCX completed), as published to the runner.
  uint32_t consumed() const;

  // Proxy thread, after the Connector is gone: steps of an orderly close. Returns true once
  // every UCX resource is released and the link may be deleted. Never waits: call again.
  bool release(std::chrono::steady_clock::time_point now);

 private:
  ncclResult_t start();
  ncclResult_t progressRecv(bool* moved);
  ncclResult_t progressSend(bool* moved);
  ncclResult_t takeCredits(bool* moved);  // send side
  // Send side: completed sends, then head. quiet: stop at a failed send without a WARN.
  ncclResult_t finishSends(bool quiet, bool* moved);
  ncclResult_t fail(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  // The first message received (recv) or sent and completed (send): a WARN if it came
  // kSlowFirstMessage or more after start(), naming the link: UCX's connection set-up (its
  // own sockets between the workers) stalled, and every rank waiting on this one may time out.
  void firstMessage(const char* what);
  void* postRecv(void* buf, size_t bytes, uint64_t tag, uint64_t mask, bool registered);
  void* postSend(const void* buf, size_t bytes, uint64_t tag, bool registered);
  static void onEpError(void* arg, ucp_ep_h ep, ucs_status_t status);

  UcxWorker* worker_;
  ConnSide side_;
  int peerRank_;
  int channel_;
  uint32_t nSlots_;
  uint32_t slotBytes_;
  uint32_t id_;
  uint32_t peerId_ = 0;
  std::vector<uint8_t> peerAddress_;

  char* block_ = nullptr;  // FifoControl, then the Simple slots
  FifoControl* control_ = nullptr;
  char* slots_ = nullptr;
  size_t blockBytes_ = 0;
  HostMapping device_;  // a CUDA rank's registration of block_ (released before it is freed)

  bool started_ = false;
  std::chrono::steady_clock::time_point startedAt_{};
  bool firstSeen_ = false;  // firstMessage() ran
  ucp_mem_h memh_ = nullptr;
  ucp_ep_h ep_ = nullptr;
  std::vector<void*> slotReqs_;  // per slot: the posted receive (recv) or the send (send)
  std::vector<void*> metaReqs_;  // per slot: the same for its SlotMeta message
  uint32_t posted_ = 0;          // recv: next step to post; send: next step to send
  uint32_t completed_ = 0;       // recv: tail (steps received); send: steps UCX finished
  uint32_t head_ = 0;            // send: head published to the runner (sends UCX finished)
  uint32_t remoteHead_ = 0;      // send: the receiver's head, from its credits
  uint32_t credit_ = 0;          // recv: last head sent; send: receive buffer of credits
  void* creditReq_ = nullptr;    // recv: the credit send in flight; send: the posted receive
  uint64_t closeBuf_ = 0;
  void* closeReq_ = nullptr;  // the posted receive of the peer's close message

  // release()
  int releasePhase_ = 0;
  void* closeSendReq_ = nullptr;
  uint32_t lastCredit_ = 0;  // recv: the head sent just before the close message
  void* lastCreditReq_ = nullptr;
  void* epCloseReq_ = nullptr;
  std::chrono::steady_clock::time_point releaseDeadline_{};

  std::atomic<uint32_t> consumed_{0};  // send: remoteHead_, for consumed() on any thread
  std::atomic<int> epStatus_{0};       // ucs_status_t from the error handler; 0: fine
  std::atomic<bool> peerClosed_{false};
  std::atomic<bool> failed_{false};
};

// Tags: 2 bits of kind, 30 bits of the receiving link's id, 32 bits of step.
// kUcxMeta: a slot's SlotMeta (size and the sender's call signature), sent beside its data.
enum UcxTagKind : uint64_t { kUcxData = 0, kUcxCredit = 1, kUcxClose = 2, kUcxMeta = 3 };
inline uint64_t ucxTag(UcxTagKind kind, uint32_t linkId, uint32_t step) {
  return (uint64_t{kind} << 62) | (uint64_t{linkId & 0x3fffffffu} << 32) | step;
}

}  // namespace ringcc
