// Host-side launch planning of the CUDA batch kernel (src/cuda/launch_plan.h): what goes into
// each launch's argument block for a batch (jobs, channels, buffers, counts, sizes) and the
// limits, without a GPU. Also the embedded kernel image of a CUDA build.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ringcc_config.h"
#include "src/base/error.h"
#include "src/cuda/device_uploads.h"
#include "src/cuda/kernel_module.h"
#include "src/cuda/launch_plan.h"
#include "src/plan/planner.h"

using namespace ringcc;

namespace {

// Fake device addresses: the host address moved by a fixed offset, so tests can tell that the
// resolver's answer (not the host pointer) went into the block.
constexpr uintptr_t kDeviceOffset = 0x100000;
template <class T>
const T* dev(const T* p) {
  return reinterpret_cast<const T*>(reinterpret_cast<uintptr_t>(p) + kDeviceOffset);
}

ncclResult_t fakeResolve(const PlanJob& job, JobDeviceRefs* refs) {
  refs->program = dev(job.program);
  refs->ports = reinterpret_cast<const ConnectorView*>(0x5000 + 64 * job.channel);
  refs->ringRanks = job.ringRanks ? dev(job.ringRanks) : nullptr;
  return ncclSuccess;
}

LaunchContext context(uint32_t channels) {
  LaunchContext ctx;
  ctx.scratch = reinterpret_cast<ChannelScratch*>(0x7000000);
  ctx.nScratch = channels;
  ctx.abortFlag = reinterpret_cast<const uint32_t*>(0x8000);
  ctx.status = reinterpret_cast<uint32_t*>(0x9000);
  return ctx;
}

// A job of `buffers` buffers and `counts` counts on `channel`, with recognisable words.
PlanJob job(Program* program, int channel, int buffers, int counts, uint64_t tag) {
  program->nBuffers = static_cast<uint16_t>(buffers);
  program->nCounts = static_cast<uint16_t>(counts);
  PlanJob j;
  j.channel = channel;
  j.name = "test";
  j.program = program;
  j.type = ncclFloat32;
  j.elemSize = 4;
  j.nChannels = 4;
  j.sliceElems = 1024;
  j.chunkElems = 4096;
  j.sig.coll = 3;
  j.sig.op = 1;
  j.sig.root = -1;
  for (int b = 0; b < buffers; ++b) {
    j.inputs.push_back(reinterpret_cast<const void*>(tag * 1000 + b));
    j.outputs.push_back(reinterpret_cast<void*>(tag * 1000 + 500 + b));
  }
  for (int c = 0; c < counts; ++c) j.counts.push_back(tag * 100 + c);
  return j;
}

}  // namespace

TEST_CASE("a batch's jobs go into one launch with their words", "[launch_plan]") {
  static Program programs[3];
  std::vector<PlanJob> jobs = {job(&programs[0], 0, 1, 1, 7), job(&programs[1], 2, 2, 3, 8),
                               job(&programs[2], 1, 1, 1, 9)};
  std::vector<BatchArgs> launches;
  REQUIRE(packLaunches(jobs, context(4), fakeResolve, &launches) == ncclSuccess);
  REQUIRE(launches.size() == 1);
  const BatchArgs& b = launches[0];
  CHECK(b.nJobs == 3);
  CHECK(b.nBlocks == 3);  // channels 0..2
  CHECK(b.scratch == context(4).scratch);
  CHECK(b.abortFlag == context(4).abortFlag);
  CHECK(b.status == context(4).status);
  uint32_t at = 0;
  for (uint32_t i = 0; i < b.nJobs; ++i) {
    const DeviceJob& d = b.jobs[i];
    const PlanJob& j = jobs[i];
    INFO("job " << i);
    CHECK(d.program == dev(j.program));
    CHECK(d.ports == reinterpret_cast<const ConnectorView*>(0x5000 + 64 * j.channel));
    CHECK(d.channel == static_cast<uint32_t>(j.channel));
    CHECK(d.nChannels == 4);
    CHECK(d.sliceElems == 1024);
    CHECK(d.chunkElems == 4096);
    CHECK(d.type == ncclFloat32);
    CHECK(d.elemSize == 4);
    CHECK(d.sigColl == 3);
    CHECK(d.sigRoot == -1);
    CHECK(d.wordsAt == at);
    CHECK(d.nBuffers == j.inputs.size());
    CHECK(d.nCounts == j.counts.size());
    const uint64_t* w = b.words + d.wordsAt;
    for (size_t k = 0; k < j.inputs.size(); ++k) {
      CHECK(w[k] == reinterpret_cast<uintptr_t>(j.inputs[k]));
      CHECK(w[d.nBuffers + k] == reinterpret_cast<uintptr_t>(j.outputs[k]));
    }
    for (size_t k = 0; k < j.counts.size(); ++k) CHECK(w[2 * d.nBuffers + k] == j.counts[k]);
    at += static_cast<uint32_t>(jobWords(j));
  }
}

TEST_CASE("a job carrying more than its Program uses packs what the Program reads",
          "[launch_plan]") {
  // Grouped send/recv: a send to self and its receive push a count each, and the Program
  // reads one of them; the kernel finds outputs and counts by the Program's sizes.
  Program program;
  std::vector<PlanJob> jobs = {job(&program, 0, 2, 3, 7)};
  jobs[0].counts.push_back(999);      // one more count than the Program's 3
  jobs[0].inputs.push_back(nullptr);  // and one more buffer than its 2
  jobs[0].outputs.push_back(nullptr);
  CHECK(jobWords(jobs[0]) == 2 * 2 + 3);
  std::vector<BatchArgs> launches;
  REQUIRE(packLaunches(jobs, context(1), fakeResolve, &launches) == ncclSuccess);
  const uint64_t* w = launches[0].words;
  CHECK(w[2] == 7 * 1000 + 500);  // outputs right after the Program's 2 inputs
  CHECK(w[4] == 7 * 100);         // counts right after its 2 outputs
  CHECK(w[6] == 7 * 100 + 2);
  jobs[0].counts.resize(2);  // fewer than the Program reads: an internal error
  CHECK(packLaunches(jobs, context(1), fakeResolve, &launches) == ncclInternalError);
}

TEST_CASE("a batch too big for one argument block is cut between jobs", "[launch_plan]") {
  // More jobs than one launch holds: cut every kLaunchMaxJobs, order kept.
  std::vector<Program> programs(2 * kLaunchMaxJobs + 1);
  std::vector<PlanJob> jobs;
  for (size_t i = 0; i < programs.size(); ++i)
    jobs.push_back(job(&programs[i], static_cast<int>(i % 2), 1, 1, i + 1));
  std::vector<BatchArgs> launches;
  REQUIRE(packLaunches(jobs, context(2), fakeResolve, &launches) == ncclSuccess);
  REQUIRE(launches.size() == 3);
  CHECK(launches[0].nJobs == kLaunchMaxJobs);
  CHECK(launches[1].nJobs == kLaunchMaxJobs);
  CHECK(launches[2].nJobs == 1);
  CHECK(launches[2].nBlocks == 1);  // its one job is on channel 0
  size_t i = 0;
  for (const BatchArgs& b : launches)
    for (uint32_t k = 0; k < b.nJobs; ++k, ++i)
      CHECK(b.words[b.jobs[k].wordsAt + 2] == (i + 1) * 100);

  // More words than one launch holds: cut before the job that does not fit.
  const int big = kLaunchWords / 3 - 1;  // 2 * big + big words, just under a third... of it
  std::vector<Program> bigPrograms(2);
  std::vector<PlanJob> wide = {job(&bigPrograms[0], 0, big, big, 1),
                               job(&bigPrograms[1], 0, big / 2, 1, 2)};
  REQUIRE(jobWords(wide[0]) + jobWords(wide[1]) > static_cast<size_t>(kLaunchWords));
  REQUIRE(packLaunches(wide, context(1), fakeResolve, &launches) == ncclSuccess);
  REQUIRE(launches.size() == 2);
  CHECK(launches[1].jobs[0].wordsAt == 0);
  CHECK(launches[1].words[0] == 2000);
}

TEST_CASE("launch limits are errors that name them", "[launch_plan]") {
  std::vector<BatchArgs> launches;
  static Program programs[3];
  // A channel beyond the communicator's scratch.
  std::vector<PlanJob> far = {job(&programs[0], 4, 1, 1, 1)};
  CHECK(packLaunches(far, context(4), fakeResolve, &launches) == ncclInvalidUsage);
  CHECK(lastErrorMessage().find("channel 4") != std::string::npos);
  // One job with more words than a launch carries (a large grouped send/recv).
  std::vector<PlanJob> huge = {job(&programs[1], 0, kMaxBuffers, 1, 1)};
  CHECK(packLaunches(huge, context(1), fakeResolve, &launches) == ncclInvalidUsage);
  CHECK(lastErrorMessage().find("not implemented yet") != std::string::npos);
  // Tables shorter than the Program reads.
  std::vector<PlanJob> bad = {job(&programs[2], 0, 2, 1, 1)};
  bad[0].outputs.pop_back();
  CHECK(packLaunches(bad, context(1), fakeResolve, &launches) == ncclInternalError);
  // A resolver's failure is the packing's.
  std::vector<PlanJob> ok = {job(&programs[0], 0, 1, 1, 1)};
  auto failing = [](const PlanJob&, JobDeviceRefs*) {
    return fail(ncclUnhandledCudaError, "test", "upload failed");
  };
  CHECK(packLaunches(ok, context(1), failing, &launches) == ncclUnhandledCudaError);
}

TEST_CASE("the planner's jobs fit the argument block", "[launch_plan]") {
  // Real jobs: an 8-rank all-reduce on 4 channels, and a grouped send/recv to every peer.
  PlanContext ctx;
  ctx.nranks = 8;
  ctx.rank = 3;
  ctx.ring = ConnGeometry{8, 1 << 17, 0, 0};
  ctx.p2p = ConnGeometry{8, 1 << 15, 0, 0};
  ctx.tune.minChannels = ctx.tune.maxChannels = 4;
  Planner planner(ctx);
  Plan plan;
  std::vector<float> in(1 << 20), out(1 << 20);
  std::vector<CollArgs> ops(1);
  ops[0].kind = Coll::AllReduce;
  ops[0].sendbuff = in.data();
  ops[0].recvbuff = out.data();
  ops[0].count = in.size();
  ops[0].datatype = ncclFloat32;
  ops[0].redOp = makeRedOp(ncclSum, ncclFloat32, 8);
  REQUIRE(planner.plan(ops, &plan) == ncclSuccess);
  REQUIRE(plan.nJobs >= 1);
  std::vector<BatchArgs> launches;
  REQUIRE(packLaunches(std::span<const PlanJob>(plan.jobs.data(), plan.nJobs), context(4),
                       fakeResolve, &launches) == ncclSuccess);
  REQUIRE(launches.size() == 1);
  CHECK(launches[0].nJobs == plan.nJobs);
  CHECK(launches[0].nBlocks == static_cast<uint32_t>(plan.jobs[plan.nJobs - 1].channel + 1));
  const uint64_t* w = launches[0].words + launches[0].jobs[0].wordsAt;
  CHECK(w[0] == reinterpret_cast<uintptr_t>(in.data()));

  std::vector<CollArgs> p2p;
  for (int peer = 0; peer < 8; ++peer) {
    if (peer == 3) continue;
    for (Coll k : {Coll::Send, Coll::Recv}) {
      CollArgs a;
      a.kind = k;
      a.sendbuff = in.data();
      a.recvbuff = out.data();
      a.count = 1024;
      a.root = peer;
      p2p.push_back(a);
    }
  }
  REQUIRE(planner.plan(p2p, &plan) == ncclSuccess);
  REQUIRE(packLaunches(std::span<const PlanJob>(plan.jobs.data(), plan.nJobs), context(4),
                       fakeResolve, &launches) == ncclSuccess);
  CHECK(launches.size() >= 1);
}

TEST_CASE("a CUDA build embeds the batch kernel's fatbin", "[launch_plan]") {
  size_t size = 0;
  const unsigned char* image = batchKernelImage(&size);
#if RINGCC_HAVE_CUDA
  REQUIRE(image != nullptr);
  REQUIRE(size > 1024);
  uint32_t magic = 0;
  std::memcpy(&magic, image, sizeof magic);
  CHECK(magic == 0xba55ed50u);  // the fatbin header's magic
  CHECK(reinterpret_cast<uintptr_t>(image) % 16 == 0);
  std::string bytes(reinterpret_cast<const char*>(image), size);
  CHECK(bytes.find("ringccBatchKernel") != std::string::npos);
#else
  CHECK(image == nullptr);
  CHECK(size == 0);
#endif
}

namespace {

// A fake driver whose device memory is host memory: enough to test what is uploaded when.
int gAllocs = 0, gFrees = 0, gCopies = 0, gHostAllocs = 0;
CudaDriver hostMemoryDriver() {
  CudaDriver d;
  d.cuGetErrorName = [](CuResult, const char** name) {
    *name = "FAKE";
    return kCuSuccess;
  };
  d.cuMemAlloc = [](CuDevicePtr* p, size_t bytes) {
    ++gAllocs;
    // cuMemAlloc's blocks are at least 256-byte aligned.
    *p = reinterpret_cast<CuDevicePtr>(aligned_alloc(256, (bytes + 255) / 256 * 256));
    return kCuSuccess;
  };
  d.cuMemFree = [](CuDevicePtr p) {
    ++gFrees;
    free(reinterpret_cast<void*>(p));
    return kCuSuccess;
  };
  d.cuMemHostAlloc = [](void** p, size_t bytes, unsigned) {
    ++gHostAllocs;
    *p = malloc(bytes);
    return kCuSuccess;
  };
  d.cuMemFreeHost = [](void* p) {
    --gHostAllocs;
    free(p);
    return kCuSuccess;
  };
  d.cuMemcpyHtoDAsync = [](CuDevicePtr dst, const void* src, size_t bytes, CuStream) {
    ++gCopies;
    memcpy(reinterpret_cast<void*>(dst), src, bytes);
    return kCuSuccess;
  };
  return d;
}

}  // namespace

TEST_CASE("long-lived tables are uploaded once per contents, into an arena", "[launch_plan]") {
  gAllocs = gFrees = gCopies = gHostAllocs = 0;
  CudaDriver cu = hostMemoryDriver();
  {
    DeviceUploads uploads(cu);
    REQUIRE(uploads.reserve(256) == ncclSuccess);  // what the engine does at init
    CHECK(gAllocs == 1);
    CHECK(gHostAllocs == 1);  // the chunk's page-locked twin
    int ring[4] = {0, 2, 1, 3};
    const int* d1 = nullptr;
    const int* d2 = nullptr;
    REQUIRE(uploads.get(ring, 4, nullptr, false, &d1) == ncclSuccess);
    CHECK(d1 != ring);
    CHECK(std::memcmp(d1, ring, sizeof ring) == 0);
    CHECK(gAllocs == 1);  // from the arena: no allocation per upload
    REQUIRE(uploads.get(ring, 4, nullptr, false, &d2) == ncclSuccess);
    CHECK(d2 == d1);  // same contents: no new upload
    CHECK(uploads.uploads() == 1);
    ring[1] = 3;  // rewritten in place (the planner's grouped send/recv Programs are)
    REQUIRE(uploads.get(ring, 4, nullptr, false, &d2) == ncclSuccess);
    CHECK(d2 != d1);
    CHECK(d2[1] == 3);
    CHECK(d1[1] == 2);  // the old copy stays valid for kernels still queued
    ring[1] = 2;        // back to the first contents: its copy is found again
    REQUIRE(uploads.get(ring, 4, nullptr, false, &d2) == ncclSuccess);
    CHECK(d2 == d1);
    CHECK(uploads.uploads() == 2);
    // Beyond kMaxVersions, the oldest copy is forgotten (its memory stays), not reused; the
    // arena grows by a new chunk when full (256 bytes hold 4 copies of 64).
    for (int v = 0; v < static_cast<int>(DeviceUploads::kMaxVersions) + 2; ++v) {
      ring[0] = 100 + v;
      REQUIRE(uploads.get(ring, 4, nullptr, false, &d2) == ncclSuccess);
      CHECK(d2[0] == 100 + v);
      CHECK(reinterpret_cast<uintptr_t>(d2) % DeviceUploads::kAlign == 0);
    }
    CHECK(uploads.chunks() > 1);
    CHECK(gAllocs == static_cast<int>(uploads.chunks()));
    CHECK(gCopies == static_cast<int>(uploads.uploads()));
    CHECK(gFrees == 0);
  }
  CHECK(gFrees == gAllocs);  // every chunk freed with the communicator's uploads
  CHECK(gHostAllocs == 0);
}

TEST_CASE("a stream being captured finds its copies but cannot upload", "[launch_plan]") {
  CudaDriver cu = hostMemoryDriver();
  DeviceUploads uploads(cu);
  REQUIRE(uploads.reserve(4096) == ncclSuccess);
  int ring[2] = {1, 0};
  const int* first = nullptr;
  const int* again = nullptr;
  REQUIRE(uploads.get(ring, 2, nullptr, false, &first) == ncclSuccess);  // the warm-up call
  CHECK(uploads.get(ring, 2, nullptr, true, &again) == ncclSuccess);  // captured: found, no upload
  CHECK(again == first);
  ring[0] = 5;  // a new shape while capturing
  CHECK(uploads.get(ring, 2, nullptr, true, &again) == ncclInvalidUsage);
  CHECK(lastErrorMessage().find("before capturing") != std::string::npos);
  CHECK(uploads.uploads() == 1);
}
