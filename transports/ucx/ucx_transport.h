// ucx: ranks on different hosts (or any ranks, with NCCL_NET=ucx), over UCP tag matching.
//
// Why tags: the receiver posts a tagged receive straight into each free slot of the FIFO it
// owns, so data lands where the runner reads it with no extra copy, and the proxy publishes
// tail itself once UCX says the receive is complete, which is exactly the FIFO contract's
// release of tail after the bytes. RMA (put into the receiver's slots) would also need a
// remote tail write ordered after the data, and over TCP UCX emulates it with messages that
// the target's worker must progress anyway; active messages hand eager data over in UCX's
// buffers, which costs a copy or a rendezvous dance per slot.
//
// Each side owns a FIFO in its own memory (transports/ucx/ucx_link.h): the receiver's is the
// one the runner reads; the sender's is a local staging FIFO the runner fills. The proxy
// thread (transports/proxy) moves filled slots to the peer and the receiver's head back as credits,
// and sleeps on the UCX worker's event fd and the doorbell when idle. Slots are registered
// with UCX once per connection.
//
// Connection infos: both sides send their link id (for tags) and the process's UCX worker
// address (a variable tail of the info); the geometry comes in the info's header. No LL memory (llSlotBytes 0 in
// the views): a communicator that uses the network gets connections without LL, and the
// planner falls back to Simple (src/exec/connections.cc). References: a send side's
// refKind is kRefNetwork from the start (its reader is this process's proxy), so a Direct
// runner publishes slices of kRefMinBytes and up by reference and the proxy sends them from
// the user's buffer, as plain data; a receive side's stays kRefNone.
//
// CUDA ranks stage through host memory: each side's FIFO is registered for the GPU
// (transports/host_mapped.h), the kernels copy into and out of its slots, the proxy moves them
// as for host ranks. No references (device buffers), and no doorbell in the view (a kernel
// cannot ring it): the proxy polls such links (Connector::fedByDevice, transports/proxy/proxy.h).
//
// Peer state: Closed when the peer's close message arrived (its Connector was destroyed);
// Dead when UCX reported the endpoint failed (process killed, link down) or progress failed.
// A link that is silent (cable pulled, no UCX error yet) ends the runner's wait at
// NCCL_TIMEOUT.
#pragma once

#include <cstdint>

#include "transports/transport.h"

namespace ringcc {

inline constexpr uint32_t kUcxInfoVersion = 2;

// Both sides' info, followed by the worker address bytes.
struct UcxInfo {
  uint32_t linkId;  // tags addressed to this side carry it
  uint32_t pad;
};

Transport& ucxTransport();

// NCCL_NET: *forced is true when it names "ucx" (any case), false when unset or empty.
// ncclInvalidArgument (WARN naming NCCL_NET and the valid value) for anything else.
ncclResult_t netForced(bool* forced);

}  // namespace ringcc
