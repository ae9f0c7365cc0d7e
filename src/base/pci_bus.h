// Which physical GPU a CUDA device ordinal is. Ordinals are per process (CUDA_VISIBLE_DEVICES
// renumbers them), so ranks in different processes compare PCI bus ids instead, exchanged in
// their PeerInfo at init: that is how a rank learns that a peer of another process uses the
// same GPU, or one whose memory its kernels can write (transports/shm/device_slots.h).
//
// A bus id is packed as domain << 16 | bus << 8 | device (a GPU is PCI function 0), printed as
// NCCL prints it: "0000:1b:00.0".
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl.h"

namespace ringcc {

// The bus id of this process's device `dev` (the driver must be loaded: a CUDA communicator).
ncclResult_t cudaDeviceBusId(int dev, int64_t* out);

// This process's device with bus id `busId`, or -1 when it does not see that GPU (or no driver
// is loaded, or busId is -1).
int cudaDeviceWithBusId(int64_t busId);

// "0000:1b:00.0" into buf (at least 13 bytes); "none" for -1.
const char* formatBusId(int64_t busId, char* buf, size_t size);

}  // namespace ringcc
