// An emulated CUDA driver for host tests of the CUDA engine (src/cuda/cuda_engine.h) on a
// machine without a GPU. Only the driver is emulated; everything above it is the real code:
// the engine, the p2p transport's FIFOs "in device memory", uploads, launch packing, and the
// batch kernel's own block loop (kernels/cuda/batch_block.h), which a launch runs here with one
// host thread per block and HostSync instead of 512 threads and DeviceSync, and the Adasum
// kernel's block body (kernels/adasum_tasks.h, adasumRunBlock), one host thread as a block.
//
//   contexts   device d's primary context is 0x1000 + d (d < 4); current per thread
//   memory     cuMemAlloc / cuMemHostAlloc are host allocations; a pointer inside a
//              cuMemAlloc block is device memory, any other is page-locked host memory;
//              cuMemHostGetDevicePointer answers only inside a cuMemHostAlloc block or a
//              cuMemHostRegister range (DEVICEMAP), as the driver does; cuMemAllocAsync
//              allocates at once, cuMemFreeAsync frees when its stream gets there (both
//              refused inside a capture: no memory nodes in graphs here)
//   IPC        each cuMemAlloc block is a memfd mapped shared; its CuIpcMemHandle names the
//              process and fd, and cuIpcOpenMemHandle in another process maps the same pages
//              (through /proc/<pid>/fd), so forked ranks really share "GPU memory"; a process
//              cannot open its own handles, and without peer access (disablePeerAccess) no
//              other device's, as the driver answers
//   devices    4, on PCI buses 0000:18:00.0, 0000:28:00.0, ... (cuDeviceGetAttribute)
//   streams    each stream (the legacy default stream too) is a host thread running its
//              tasks in order: kernel launches, async copies and memsets, event records and
//              waits, host functions; cuStreamSynchronize waits until its queue is empty
//   strict     the conservative reading of the documentation: cuMemAlloc, cuMemHostAlloc, the
//              synchronous copies and memsets and cuStreamSynchronize wait until no kernel runs
//              on the current context's device. A kernel waiting for a peer's kernel that such
//              a call holds back would wait for ever on a GPU; here the call gives up after
//              setIdleWaitLimit (5 s by default) with kFakeStall, counted by stalls()
//   capture    beginCapture/endCapture/launchGraph, in the default (global) mode: a capturing
//              stream's work goes into the graph and runs at launchGraph; an ordinary stream
//              waiting on an event recorded in an active capture joins it; waiting inside a
//              capture on an event recorded outside it is CUDA_ERROR_STREAM_CAPTURE_ISOLATION
//              and invalidates the capture; cuEventQuery, cuEventSynchronize and (after the
//              capture ended) cuStreamWaitEvent on an event last recorded in a capture are
//              CUDA_ERROR_CAPTURED_EVENT; the calls that "strict" names, and cuEventQuery,
//              while any capture is active, are CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and
//              invalidate it, unless the calling thread's mode is relaxed
//              (cuThreadExchangeStreamCaptureMode)
//   module     cuCtxGetId: each scope's contexts are new (ids unseen in the process, at the
//              same addresses); cuFuncLoad is counted (functionLoads)
//
// Install with FakeCudaScope: it makes the stand-in libcuda.so.1 answer with this emulation
// (tests/support/fake_driver.h), and at its end drains every stream and leaves the stand-in
// without answers. One at a time per process.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "src/base/cuda_driver.h"

namespace ringcc::test {

// What a call that would wait for ever for a running kernel returns (CUDA_ERROR_LAUNCH_TIMEOUT:
// the driver has no code for "deadlock").
constexpr CuResult kFakeStall = 702;
constexpr CuResult kFakeIllegalState = 401;  // CUDA_ERROR_ILLEGAL_STATE
// A captured graph: the captured work in order.
using FakeGraph = std::shared_ptr<const std::vector<std::function<void()>>>;

class FakeCudaScope {
 public:
  FakeCudaScope();
  ~FakeCudaScope();
  FakeCudaScope(const FakeCudaScope&) = delete;
  FakeCudaScope& operator=(const FakeCudaScope&) = delete;

  const CudaDriver& driver() const;

  // A new user stream (cudaStreamCreate's), destroyed with the scope.
  CuStream newStream();
  // Stream capture (cuStreamBeginCapture, global mode): from now on `s`'s work is captured.
  void beginCapture(CuStream s);
  // Ends the capture begun on `s` (every stream that joined it leaves it): the graph, or
  // CUDA_ERROR_STREAM_CAPTURE_INVALIDATED if an error invalidated the capture.
  CuResult endCapture(CuStream s, FakeGraph* graph);
  // Queues a graph's work on `s`, as cuGraphLaunch.
  void launchGraph(const FakeGraph& graph, CuStream s);
  // How long a call that waits until no kernel runs (see "strict") waits before kFakeStall.
  void setIdleWaitLimit(int ms);
  // Waits until every stream has run everything queued so far.
  void synchronizeAll();

  // From now on no device can access another's memory (PCIe GPUs under different root
  // complexes): cuDeviceCanAccessPeer says 0 and cuCtxEnablePeerAccess fails.
  void disablePeerAccess();

  size_t kernelsRun() const;             // launches that ran to their end
  size_t adasumKernelsRun() const;       // ... of them ringccAdasumKernel
  size_t rmaKernelsRun() const;          // ... of them ringccRmaKernel
  size_t kernelsQueued() const;          // cuLaunchKernel calls that succeeded
  size_t functionLoads() const;          // cuFuncLoad calls (the kernel loaded eagerly)
  size_t liveDeviceAllocs() const;       // cuMemAlloc blocks not freed yet
  size_t liveHostAllocs() const;         // cuMemHostAlloc blocks not freed yet
  size_t liveHostRegistrations() const;  // cuMemHostRegister ranges not unregistered yet
  size_t peerAccessCalls() const;        // cuCtxEnablePeerAccess calls
  size_t stalls() const;                 // calls that gave up waiting for a running kernel
  size_t captureErrors() const;          // capture isolation, captured-event, unsafe-call errors
  size_t ipcOpens() const;               // cuIpcOpenMemHandle calls that succeeded
  size_t liveIpcImports() const;         // ... whose memory is not closed yet
};

}  // namespace ringcc::test
