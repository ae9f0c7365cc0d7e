// An emulated CUDA driver for host tests of the CUDA engine (src/cuda/cuda_engine.h) on a
// machine without a GPU. Only the driver is emulated; everything above it is the real code:
// the engine, the p2p transport's FIFOs "in device memory", uploads, launch packing, and the
// batch kernel's own block loop (kernels/cuda/batch_block.h), which a launch runs here with one
// host thread per block and HostSync instead of 512 threads and DeviceSync.
//
//   contexts   device d's primary context is 0x1000 + d (d < 4); current per thread
//   memory     cuMemAlloc / cuMemHostAlloc are host allocations; a pointer inside a
//              cuMemAlloc block is device memory, any other is page-locked host memory;
//              cuMemHostGetDevicePointer answers only inside a cuMemHostAlloc block or a
//              cuMemHostRegister range (DEVICEMAP), as the driver does
//   IPC        each cuMemAlloc block is a memfd mapped shared; its CuIpcMemHandle names the
//              process and fd, and cuIpcOpenMemHandle in another process maps the same pages
//              (through /proc/<pid>/fd), so forked ranks really share "GPU memory"; a process
//              cannot open its own handles, and without peer access (disablePeerAccess) no
//              other device's, as the driver answers
//   devices    4, on PCI buses 0000:18:00.0, 0000:28:00.0, ... (cuDeviceGetAttribute)
//   streams    each stream (the legacy default stream too) is a host thread running its
//              tasks in order: kernel launches, async copies and memsets, event records and
//              waits; cuStreamSynchronize waits until its queue is empty
//   capture    a stream made with captureStream() answers cuStreamIsCapturing with "active"
//   module     cuCtxGetId: each scope's contexts are new (ids unseen in the process, at the
//              same addresses); cuFuncLoad is counted (functionLoads)
//
// Install with FakeCudaScope (it substitutes the process's driver table, then drains every
// stream and restores the real one). One at a time per process.
#pragma once

#include <cstddef>

#include "src/base/cuda_driver.h"

namespace ringcc::test {

class FakeCudaScope {
 public:
  FakeCudaScope();
  ~FakeCudaScope();
  FakeCudaScope(const FakeCudaScope&) = delete;
  FakeCudaScope& operator=(const FakeCudaScope&) = delete;

  const CudaDriver& driver() const;

  // A new user stream (cudaStreamCreate's), destroyed with the scope.
  CuStream newStream();
  // A stream that says it is being captured into a CUDA graph.
  CuStream captureStream();
  // Waits until every stream has run everything queued so far.
  void synchronizeAll();

  // From now on no device can access another's memory (PCIe GPUs under different root
  // complexes): cuDeviceCanAccessPeer says 0 and cuCtxEnablePeerAccess fails.
  void disablePeerAccess();

  size_t kernelsRun() const;             // launches that ran to their end
  size_t functionLoads() const;          // cuFuncLoad calls (the kernel loaded eagerly)
  size_t liveDeviceAllocs() const;       // cuMemAlloc blocks not freed yet
  size_t liveHostAllocs() const;         // cuMemHostAlloc blocks not freed yet
  size_t liveHostRegistrations() const;  // cuMemHostRegister ranges not unregistered yet
  size_t peerAccessCalls() const;        // cuCtxEnablePeerAccess calls
  size_t ipcOpens() const;               // cuIpcOpenMemHandle calls that succeeded
  size_t liveIpcImports() const;         // ... whose memory is not closed yet
};

}  // namespace ringcc::test
