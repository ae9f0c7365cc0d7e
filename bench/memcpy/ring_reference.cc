// ring_reference: the 2-rank ring all-reduce's data movement on this machine with nothing
// else: two threads pinned to two cores, busy-polling, no library. Beside memcpy_bench's copy
// ceiling, it says what a plain implementation of ringcc's host path gets between two ranks
// here (not a bound: a better pipeline can beat it a little):
//
//   slots     each rank copies its half into 128 KiB slots of a FIFO to the peer (8 per
//             direction), the peer reduces them with its own half into its output and into
//             its FIFO back, and each rank copies the reduced half it gets into its output:
//             two copies per hop, what ringcc does over shared memory with plain buffers;
//   in-place  each rank reduces its half with the peer's input read in place, straight into
//             its output, and copies the peer's reduced half from the peer's output: one copy
//             per hop, what ringcc's Direct protocol does with buffers from ncclMemAlloc.
//
//   ring_reference [maxBytes=256M] [iters=20]
//
// For float32 sums from 64 KiB to maxBytes (x4): the median time of `iters` all-reduces (after
// one untimed) and the bus bandwidth (bytes / time: a 2-rank all-reduce's busbw factor is 1),
// as all_reduce_perf prints them. The buffers are maxBytes long and walked through as
// all_reduce_perf walks them (each call on the next window of its size), so a size far below
// maxBytes reads memory, not cache: `ring_reference 1M` gives the cache-warm 1 MiB. The results
// are checked.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "bench/launcher/binding.h"
#include "bench/perf/perf_options.h"

namespace {

constexpr size_t kSliceBytes = 128 << 10;  // ringcc's default slot (NCCL_BUFFSIZE 1 MiB / 8)
constexpr size_t kSliceElems = kSliceBytes / sizeof(float);
constexpr int kSlots = 8;

using Clock = std::chrono::steady_clock;

void wait(const std::atomic<uint64_t>& v, uint64_t atLeast) {
  while (v.load(std::memory_order_acquire) < atLeast) {
  }
}

struct alignas(64) Counter {
  std::atomic<uint64_t> v{0};
};

// One direction's FIFO of slots: the sender bumps `tail` per filled slot, the receiver `head`
// per slot it is done with.
struct Fifo {
  std::vector<float> slots = std::vector<float>(kSlots * kSliceElems);
  Counter tail, head;
  float* slot(uint64_t n) { return slots.data() + (n % kSlots) * kSliceElems; }
};

struct Rank {
  std::vector<float> in, out;
  Counter reduced;  // in-place: slices of this rank's half reduced into `out`, over all calls
  uint64_t sent = 0, taken = 0;  // slots: this rank's FIFO positions (its own thread only)
};

// d0 = a + b, and d1 too unless null. In blocks of a fixed trip count, as ringcc's host
// reduce-copy (kernels/reduce_copy.h): GCC vectorizes those at -O2.
template <bool kTwoDst>
void reduceLoop(const float* __restrict a, const float* __restrict b, float* __restrict d0,
                float* __restrict d1, size_t n) {
  constexpr size_t kBlock = 32;
  size_t k = 0;
  for (; n - k >= kBlock; k += kBlock)
    for (size_t j = 0; j < kBlock; ++j) {
      const float v = a[k + j] + b[k + j];
      d0[k + j] = v;
      if constexpr (kTwoDst) d1[k + j] = v;
    }
  for (; k < n; ++k) {
    d0[k] = a[k] + b[k];
    if constexpr (kTwoDst) d1[k] = d0[k];
  }
}

void reduce(const float* a, const float* b, float* d0, float* d1, size_t n) {
  if (d1)
    reduceLoop<true>(a, b, d0, d1, n);
  else
    reduceLoop<false>(a, b, d0, nullptr, n);
}

// Rank r's half of the n elements from at0 on (the one it reduces) and the peer's: where each
// starts and how long it is. Rank 0 takes the first, rounded up.
struct Halves {
  size_t mineAt, mineLen, theirsAt, theirsLen;
};
Halves halves(int r, size_t at0, size_t n) {
  const size_t first = (n + 1) / 2, second = n - first;
  return r == 0 ? Halves{at0, first, at0 + first, second} : Halves{at0 + first, second, at0, first};
}

struct Pair {
  Rank rank[2];
  Fifo toward[2];  // toward[r]: the FIFO rank r receives from
  std::atomic<int> arrived{0};
  std::atomic<uint64_t> generation{0};

  // Both threads meet here before each call.
  void barrier() {
    const uint64_t g = generation.load();
    if (arrived.fetch_add(1) == 1) {
      arrived.store(0);
      generation.store(g + 1);
    } else {
      while (generation.load() == g) {
      }
    }
  }

  // One all-reduce of the `n` elements from `at0` on, through slots, as rank r. Half h of the
  // elements is rank h's to reduce.
  void viaSlots(int r, size_t at0, size_t n) {
    Rank& me = rank[r];
    Fifo& out = toward[1 - r];
    Fifo& in = toward[r];
    const auto [mineAt, mineLen, theirsAt, theirsLen] = halves(r, at0, n);
    auto send = [&](const float* src, size_t len) {
      wait(out.head.v, me.sent + 1 > kSlots ? me.sent + 1 - kSlots : 0);
      std::memcpy(out.slot(me.sent), src, len * sizeof(float));
      out.tail.v.store(++me.sent, std::memory_order_release);
    };
    // The slices of both halves go in lockstep: send mine's slice of theirs, reduce theirs'
    // slice of mine (and send it back), take the reduced slice of theirs.
    const size_t slices = (std::max(mineLen, theirsLen) + kSliceElems - 1) / kSliceElems;
    for (size_t s = 0; s < slices; ++s) {
      const size_t at = s * kSliceElems;
      const size_t theirsHere = at < theirsLen ? std::min(kSliceElems, theirsLen - at) : 0;
      const size_t mineHere = at < mineLen ? std::min(kSliceElems, mineLen - at) : 0;
      if (theirsHere) send(me.in.data() + theirsAt + at, theirsHere);
      if (mineHere) {
        wait(in.tail.v, me.taken + 1);
        wait(out.head.v, me.sent + 1 > kSlots ? me.sent + 1 - kSlots : 0);
        reduce(me.in.data() + mineAt + at, in.slot(me.taken), me.out.data() + mineAt + at,
               out.slot(me.sent), mineHere);
        in.head.v.store(++me.taken, std::memory_order_release);
        out.tail.v.store(++me.sent, std::memory_order_release);
      }
      if (theirsHere) {
        wait(in.tail.v, me.taken + 1);
        std::memcpy(me.out.data() + theirsAt + at, in.slot(me.taken), theirsHere * sizeof(float));
        in.head.v.store(++me.taken, std::memory_order_release);
      }
    }
  }

  // One all-reduce of the `n` elements from `at0` on, reading the peer's buffers in place, as
  // rank r; `calls` counts the calls before this one (the progress counter runs on across
  // calls). The barriers around each call keep a rank from overwriting an output the peer
  // still reads.
  void inPlace(int r, size_t at0, size_t n, uint64_t calls) {
    Rank& me = rank[r];
    Rank& peer = rank[1 - r];
    const auto [mineAt, mineLen, theirsAt, theirsLen] = halves(r, at0, n);
    const uint64_t mineSlices = (mineLen + kSliceElems - 1) / kSliceElems;
    const uint64_t theirSlices = (theirsLen + kSliceElems - 1) / kSliceElems;
    const uint64_t base = calls * std::max(mineSlices, theirSlices);
    for (uint64_t s = 0; s < std::max(mineSlices, theirSlices); ++s) {
      const size_t at = s * kSliceElems;
      if (s < mineSlices) {
        const size_t len = std::min(kSliceElems, mineLen - at);
        reduce(me.in.data() + mineAt + at, peer.in.data() + mineAt + at,
               me.out.data() + mineAt + at, nullptr, len);
      }
      me.reduced.v.store(base + s + 1, std::memory_order_release);
      if (s < theirSlices) {
        wait(peer.reduced.v, base + s + 1);
        std::memcpy(me.out.data() + theirsAt + at, peer.out.data() + theirsAt + at,
                    std::min(kSliceElems, theirsLen - at) * sizeof(float));
      }
    }
  }
};

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t maxBytes =
      argc > 1 ? ringcc::bench::parseSize(argv[1]).value_or(0) : (size_t{256} << 20);
  const int iters = argc > 2 ? std::atoi(argv[2]) : 20;
  if (maxBytes < 65536 || iters < 1) {
    std::fprintf(stderr, "usage: ring_reference [maxBytes >= 65536] [iters >= 1]\n");
    return 2;
  }
  const std::vector<int> allowed = ringcc::bench::allowedCpus();
  const int cpus[2] = {allowed.size() > 0 ? allowed[0] : -1, allowed.size() > 1 ? allowed[1] : -1};
  const size_t maxElems = maxBytes / sizeof(float);
  Pair pair;
  for (int r = 0; r < 2; ++r) {
    pair.rank[r].in.assign(maxElems, 0);
    pair.rank[r].out.assign(maxElems, 0);
    for (size_t k = 0; k < maxElems; ++k) pair.rank[r].in[k] = static_cast<float>((k + r) % 61);
  }
  std::printf("# ring_reference: 2 threads on cpus %d and %d, busy polling, median of %d\n",
              cpus[0], cpus[1], iters);
  if (cpus[1] < 0) std::printf("# (one cpu only: the two ranks share it)\n");
  std::printf("# %12s %14s %10s %14s %10s\n", "bytes", "slots (us)", "GB/s", "in-place (us)",
              "GB/s");
  bool ok = true;
  uint64_t inPlaceCalls = 0;
  for (size_t bytes = 65536; bytes <= maxBytes; bytes *= 4) {
    const size_t n = bytes / sizeof(float);
    double median[2];
    for (int mode = 0; mode < 2; ++mode) {
      std::vector<double> us;
      // Call i works on window i of the buffers, as all_reduce_perf walks through them (after
      // nccl-tests), so that a size well below maxBytes is not served from the cache.
      const size_t windows = maxElems / n;
      auto window = [&](int i) { return static_cast<size_t>(i) % windows * n; };
      auto body = [&](int r) {
        if (cpus[1] >= 0) pin(cpus[r]);
        for (int i = 0; i < iters + 1; ++i) {
          pair.barrier();
          const auto t0 = Clock::now();
          if (mode == 0)
            pair.viaSlots(r, window(i), n);
          else
            pair.inPlace(r, window(i), n, inPlaceCalls + i);
          pair.barrier();  // (the slowest rank ends the call)
          if (r == 0 && i > 0)
            us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        }
      };
      std::thread other(body, 1);
      body(0);
      other.join();
      if (mode == 1) inPlaceCalls += iters + 1;
      std::sort(us.begin(), us.end());
      median[mode] = us[us.size() / 2];
      const size_t written = std::min<size_t>(windows, iters + 1) * n;
      for (int r = 0; r < 2; ++r)
        for (size_t k = 0; k < written; ++k)
          if (pair.rank[r].out[k] != pair.rank[0].in[k] + pair.rank[1].in[k]) ok = false;
      for (int r = 0; r < 2; ++r) std::fill(pair.rank[r].out.begin(), pair.rank[r].out.end(), 0);
    }
    std::printf("  %12zu %14.2f %10.2f %14.2f %10.2f\n", bytes, median[0], bytes / median[0] / 1e3,
                median[1], bytes / median[1] / 1e3);
  }
  if (!ok) std::fprintf(stderr, "ring_reference: wrong results\n");
  return ok ? 0 : 1;
}
