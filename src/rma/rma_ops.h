// The one-sided calls as the API hands them on (src/api/mem_api.cc, src/api/rma_api.cc):
// what needs the communicator's RMA state is checked here (the window is one of this
// communicator's, the bytes fit the peer's buffer, sigIdx and ctx are in range), then the call
// runs now, or, inside ncclGroupStart/ncclGroupEnd, at the outermost ncclGroupEnd: the calls of
// one communicator in call order, those of different communicators concurrently (one thread
// may drive every rank of ncclCommInitAll), before the group's collectives.
//
// On CUDA communicators puts and waits are queued on `stream` (src/rma/rma_device.h); host
// communicators ignore it.
#pragma once

#include <cstddef>
#include <span>

#include "nccl.h"
#include "src/core/comm.h"

namespace ringcc {

// Collective. *win is set when the registration has run (at ncclGroupEnd inside a group).
ncclResult_t rmaWindowRegister(Communicator* comm, void* buff, size_t size, int flags,
                               ncclWindow_t* win);
// Collective. A NULL window is nothing to do (as NCCL).
ncclResult_t rmaWindowDeregister(Communicator* comm, ncclWindow_t win);
ncclResult_t rmaWindowUserPtr(Communicator* comm, ncclWindow_t win, void** out);

// ncclPutSignal (win set) and ncclSignal (win null, bytes 0).
ncclResult_t rmaPutSignal(Communicator* comm, const void* src, size_t bytes, int peer,
                          ncclWindow_t win, size_t offset, int sigIdx, int ctx,
                          cudaStream_t stream);
ncclResult_t rmaWaitSignal(Communicator* comm, std::span<const ncclWaitSignalDesc_t> descs,
                           cudaStream_t stream);

}  // namespace ringcc
