// Adasum over the engine's collectives. With n ranks and p the largest power of two <= n:
//
//   1. ranks p..n-1 hand their vector to rank r - p, which combines the two whole vectors;
//   2. the vector is cut into p pieces (piece j: [j c, (j + 1) c), c = count / p, the last
//      piece also takes the count % p left over). For d = 1, 2, ..., p/2, rank r and its
//      partner r ^ d hold the same pieces (those j with j = r mod d; the lower rank its copy of
//      v_s, the upper one of v_{s+d}); they exchange half of them, each keeping the pieces j
//      whose bit d is its own (the pieces are strided, not one contiguous half, so that rank r
//      ends up with piece r), sums the three products of its pieces with those of the other
//      ranks sharing v_s and v_{s+d} (the 2d ranks of its block, from an all-gather of every
//      rank's products), and combines its pieces in place;
//   3. with n == p, one ring all-gather in place (rank r's piece sits at r c, as ncclAllGather
//      lays it out) and a broadcast of the few left-over elements from rank p - 1; otherwise
//      the pieces travel back pairwise (distance-halving) and rank r - p sends the result on
//      to rank r.
//
// Each exchange of step 2 goes window by window where the executor asks for it (host
// communicators: AdasumLocal::windowElems), a window's products taken as soon as it arrived,
// from the caches. With two ranks (one level) on a host communicator, and few segments, the
// combination and step 3 are one weighted all-reduce instead (weightedPair below).
//
// Every rank sends about 2 * count elements in all, as a ring all-reduce does (the weighted
// two-rank path 1.5 times as much). The last phase runs on the ring's connections and
// pipeline, whose slots are 4 times the p2p ones, in one call instead of log2(p) (what it
// measured: docs/benchmarks.md, "Adasum: strided pieces"). The products of a level are summed
// over the ranks of a block from one all-gather of every rank's products, each rank summing
// the block's rows in rank order, so every rank of a block gets the same bits: the
// coefficients of one vector pair are the same everywhere.
//
// The local steps (copies, products, coefficients, the combination) are the executor's
// (local_steps.h): done on the calling thread for a host communicator, queued on the stream
// for a CUDA one, where the collectives are kernels queued on the same stream; so on a GPU the
// whole schedule is one fixed sequence of work on the stream, as any collective's. Where two
// ranks of a CUDA communicator share a GPU, the schedule first runs once preparing its batches
// only (connections, uploads), then every rank meets in a barrier, and only then is anything
// queued: a connection made between two of the call's kernels allocates, which may wait until
// no kernel runs on the GPU, and a kernel of the call may be waiting for this very rank.
#include "src/adasum/adasum.h"

#include <algorithm>
#include <vector>

#include "kernels/adasum.h"
#include "kernels/adasum_tasks.h"
#include "kernels/dtypes.h"
#include "src/adasum/local_steps.h"
#include "src/base/error.h"
#include "src/bootstrap/bootstrap.h"
#include "src/core/comm.h"
#include "src/exec/group.h"
#include "src/plan/coll_args.h"

namespace ringcc {
namespace {

CollArgs collArgs(Coll kind, const void* send, void* recv, size_t count, ncclDataType_t type,
                  int root, ncclComm* comm, cudaStream_t stream) {
  CollArgs a;
  a.kind = kind;
  a.sendbuff = send;
  a.recvbuff = recv;
  a.count = count;
  a.datatype = type;
  a.redOp = makeRedOp(ncclSum, type, comm->nranks);
  a.root = root;
  a.comm = comm;
  a.stream = stream;
  return a;
}

// `value` in datatype `type` (one of Adasum's four), as RedOp::scalarBits holds it.
uint64_t scalarBits(ncclDataType_t type, double value) {
  switch (type) {
    case ncclFloat64:
      return redOpScalarBits(value);
    case ncclFloat32:
      return redOpScalarBits(static_cast<float>(value));
    case ncclFloat16:
      return redOpScalarBits(floatToHalf(static_cast<float>(value)));
    default:  // ncclBfloat16
      return redOpScalarBits(floatToBf16(static_cast<float>(value)));
  }
}

// A range of elements to send or receive: `count` elements at `buf`.
struct Span {
  void* buf;
  size_t count;
};

// The caller's segments as element offsets: segment k is [start[k], start[k + 1]).
class Segments {
 public:
  Segments(const size_t* sizes, int n, size_t count) {
    if (sizes == nullptr || n == 0) {
      start_ = {0, count};
      return;
    }
    start_.resize(static_cast<size_t>(n) + 1, 0);
    for (int k = 0; k < n; ++k) start_[k + 1] = start_[k] + sizes[k];
  }
  size_t size() const { return start_.size() - 1; }

  // fn(segment, begin, end) for every segment's part inside [lo, hi), in order.
  template <class Fn>
  void forEachIn(size_t lo, size_t hi, Fn fn) const {
    if (lo >= hi) return;
    // The first segment ending after lo.
    size_t k = std::upper_bound(start_.begin() + 1, start_.end(), lo) - start_.begin() - 1;
    for (; k < size() && start_[k] < hi; ++k) {
      size_t b = std::max(lo, start_[k]);
      size_t e = std::min(hi, start_[k + 1]);
      if (b < e) fn(k, b, e);
    }
  }

 private:
  std::vector<size_t> start_;
};

// The p pieces of a vector of `count` elements: piece j is [lo(j), hi(j)).
struct Pieces {
  int p;
  size_t count;
  size_t c;  // count / p
  size_t lo(int j) const { return static_cast<size_t>(j) * c; }
  size_t hi(int j) const { return j == p - 1 ? count : lo(j + 1); }
  size_t size(int j) const { return hi(j) - lo(j); }
};

int largestPowerOfTwo(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

size_t alignUp(size_t bytes) { return (bytes + 255) & ~size_t{255}; }

// With two ranks the schedule has one level, and its combination, ca a + cb b on every
// element, is a weighted all-reduce: each rank scales its own vector by its coefficient as it
// enters an all-reduce (PreMulSum), which then sums and spreads the result as fast as any
// all-reduce, in place of the combination's pass over both copies of the kept half and the
// all-gather after it. Taken where the calling thread knows the coefficients before it queues
// the all-reduces (AdasumLocal::stepsRunAtOnce: a host communicator) and the segments are few
// (an all-reduce each, in one group).
constexpr size_t kWeightedMaxSegments = 16;

bool weightedPair(int nranks, const AdasumLocal& local, size_t segments) {
  return nranks == 2 && local.stepsRunAtOnce() && segments <= kWeightedMaxSegments;
}

// Where the parts of the workspace lie, in bytes from its start: the elements received (at most
// half the pieces, the last with the left-over; on a host of an extra rank a whole vector; on
// the weighted two-rank path one window, reused), this rank's products per segment, the table
// of every rank's products, the coefficients.
struct Layout {
  Layout(int n, int rank, size_t count, size_t elementSize, size_t segments, bool weighted,
         size_t window) {
    const int p = largestPowerOfTwo(n);
    const size_t c = count / p;
    size_t elems = rank < n - p ? count
                   : rank >= p  ? 0
                                : count - static_cast<size_t>(p / 2) * c;
    if (weighted) elems = std::min(elems, window);
    dots = alignUp(elems * elementSize);
    table = alignUp(dots + segments * sizeof(AdasumDots));
    coefficients = alignUp(table + static_cast<size_t>(n) * segments * sizeof(AdasumDots));
    total = coefficients + segments * sizeof(AdasumCoefficients);
  }
  size_t dots, table, coefficients, total;
};

// What a call decides once, before its workspace is taken: the window, the two-rank path, and
// so the workspace's layout. Both passes of the schedule (preparing, running) use it.
struct CallShape {
  CallShape(const ncclComm& comm, const AdasumLocal& local, size_t count, size_t elementSize,
            size_t segments)
      : window(std::max<size_t>(1, local.windowElems(elementSize))),
        weighted(weightedPair(comm.nranks, local, segments)),
        layout(comm.nranks, comm.rank, count, elementSize, segments, weighted, window) {}
  size_t window;  // elements an exchange moves before their products are taken
  bool weighted;  // the two-rank path: weightedPair()
  Layout layout;
};

// The pieces rank `rank` keeps at level d: those it held (j = rank mod d) whose bit d is its
// own, in increasing order; `other` gives the ones its partner keeps.
std::vector<int> keptPieces(int p, int rank, int d, bool other) {
  std::vector<int> out;
  const int first = (rank & (d - 1)) | ((rank & d) ^ (other ? d : 0));
  for (int j = first; j < p; j += 2 * d) out.push_back(j);
  return out;
}

// Elements [lo, hi) this rank combines, and where the partner's copy of them lies (its
// element lo).
struct Kept {
  size_t lo, hi;
  char* theirs;
};

// Elements [from, to) of the concatenation of `ranges` (each `length(r)` elements long), as
// ranges of the same kind: part(r, skip, n) is r's n elements from its element `skip` on.
template <class Range, class Length, class Part>
std::vector<Range> cut(const std::vector<Range>& ranges, size_t from, size_t to, Length length,
                       Part part) {
  std::vector<Range> out;
  size_t start = 0;  // where the current range starts in the concatenation
  for (const Range& r : ranges) {
    const size_t n = length(r);
    const size_t lo = std::max(from, start), hi = std::min(to, start + n);
    if (lo < hi) out.push_back(part(r, lo - start, hi - lo));
    start += n;
  }
  return out;
}

size_t spanLength(const Span& s) { return s.count; }
size_t keptLength(const Kept& k) { return k.hi - k.lo; }

template <class Range, class Length>
size_t totalLength(const std::vector<Range>& ranges, Length length) {
  size_t n = 0;
  for (const Range& r : ranges) n += length(r);
  return n;
}

// One call of the schedule on one rank.
class Schedule {
 public:
  // `prepareOnly`: the pass that only prepares every batch (AdasumLocal::preparesFirst): no
  // local step, nothing queued.
  Schedule(char* work, char* workspace, size_t count, ncclDataType_t type, const Segments& segs,
           const CallShape& shape, ncclComm* comm, cudaStream_t stream, AdasumLocal* local,
           bool prepareOnly)
      : prepareOnly_(prepareOnly),
        work_(work),
        type_(type),
        es_(dataTypeSize(type)),
        segs_(segs),
        comm_(comm),
        stream_(stream),
        local_(local),
        n_(comm->nranks),
        rank_(comm->rank),
        p_(largestPowerOfTwo(comm->nranks)),
        pc_{p_, count, count / p_},
        window_(shape.window),
        weighted_(shape.weighted),
        layout_(shape.layout),
        scratch_(workspace),
        dots_(workspace + layout_.dots),
        table_(workspace + layout_.table),
        coefficients_(workspace + layout_.coefficients) {}

  ncclResult_t run();

 private:
  char* at(size_t element) const { return work_ + element * es_; }
  ncclResult_t submit(const std::vector<CollArgs>& ops);
  ncclResult_t runStep(const AdasumArgs& args) {
    return prepareOnly_ ? ncclSuccess : local_->run(args);
  }
  ncclResult_t zeroDots() {
    return prepareOnly_ ? ncclSuccess : local_->zero(dots_, dotsBytes());
  }
  size_t dotsBytes() const { return segs_.size() * sizeof(AdasumDots); }
  ncclResult_t exchange(int peer, const std::vector<Span>& sends, const std::vector<Span>& recvs);
  ncclResult_t exchangeWithProducts(int peer, const std::vector<Span>& sends,
                                    const std::vector<Kept>& kept, bool lower, bool rolling);
  ncclResult_t exchangeLevel(int d);
  ncclResult_t weightedAllReduce();
  ncclResult_t gatherDots();
  ncclResult_t overRanges(uint32_t step, const std::vector<Kept>& kept, bool lower);
  ncclResult_t coefficients(const char* rows, uint32_t first, uint32_t count);
  ncclResult_t combinePair(const std::vector<Kept>& kept, bool lower, int d);
  ncclResult_t ringGather();
  ncclResult_t pairwiseGather();

  const bool prepareOnly_;
  char* const work_;
  const ncclDataType_t type_;
  const size_t es_;
  const Segments& segs_;
  ncclComm* const comm_;
  const cudaStream_t stream_;
  AdasumLocal* const local_;
  const int n_, rank_, p_;
  const Pieces pc_;
  const size_t window_;
  const bool weighted_;
  const Layout& layout_;
  char* const scratch_;
  char* const dots_;
  char* const table_;
  char* const coefficients_;
};

// One batch: its calls in one group, or in the prepare pass only prepared.
ncclResult_t Schedule::submit(const std::vector<CollArgs>& ops) {
  if (ops.empty()) return ncclSuccess;
  if (prepareOnly_) return local_->prepare(ops);
  RINGCC_CHECK(groupStart());
  ncclResult_t rc = ncclSuccess;
  for (const CollArgs& op : ops)
    if (rc == ncclSuccess) rc = enqueueOp(op);
  ncclResult_t end = groupEnd();
  return rc != ncclSuccess ? rc : end;
}

// One batch of sends to and receives from `peer`; empty ones are left out (both ranks of a
// pair agree on the counts, so the two sides match).
ncclResult_t Schedule::exchange(int peer, const std::vector<Span>& sends,
                                const std::vector<Span>& recvs) {
  std::vector<CollArgs> ops;
  for (const Span& s : sends)
    if (s.count > 0)
      ops.push_back(collArgs(Coll::Send, s.buf, nullptr, s.count, type_, peer, comm_, stream_));
  for (const Span& r : recvs)
    if (r.count > 0)
      ops.push_back(collArgs(Coll::Recv, nullptr, r.buf, r.count, type_, peer, comm_, stream_));
  return submit(ops);
}

// Sends `sends` to `peer` and receives the partner's copy of every kept range (kept[m]: its
// `count` elements arrive at kept[m].theirs), then the products of the kept ranges, into
// dots_, zeroed first. Window by window (AdasumLocal::windowElems): each window's products are
// taken right after it arrived, while it is still in the caches, instead of from memory in a
// pass of their own. Both ranks of a pair cut the same two lists at the same element counts,
// so their windows match. `rolling`: only the products are wanted, so every window arrives at
// the start of the scratch space (which then holds one window) instead of where `kept` says.
ncclResult_t Schedule::exchangeWithProducts(int peer, const std::vector<Span>& sends,
                                            const std::vector<Kept>& kept, bool lower,
                                            bool rolling) {
  RINGCC_CHECK(zeroDots());
  const size_t es = es_;
  const auto spanPart = [es](const Span& s, size_t skip, size_t n) {
    return Span{static_cast<char*>(s.buf) + skip * es, n};
  };
  const auto keptPart = [es](const Kept& k, size_t skip, size_t n) {
    return Kept{k.lo + skip, k.lo + skip + n, k.theirs + skip * es};
  };
  const size_t total = std::max(totalLength(sends, spanLength), totalLength(kept, keptLength));
  for (size_t from = 0, to = 0; from < total; from = to) {
    to = from + std::min(window_, total - from);  // window_ may be SIZE_MAX: no overflow
    std::vector<Kept> part = cut(kept, from, to, keptLength, keptPart);
    char* next = scratch_;
    std::vector<Span> recvs;
    for (Kept& k : part) {
      if (rolling) {
        k.theirs = next;
        next += keptLength(k) * es_;
      }
      recvs.push_back({k.theirs, keptLength(k)});
    }
    RINGCC_CHECK(exchange(peer, cut(sends, from, to, spanLength, spanPart), recvs));
    RINGCC_CHECK(overRanges(kAdasumProducts, part, lower));
  }
  return ncclSuccess;
}

// The exchange of one level with rank ^ d and its products, then the combination: the m-th
// kept piece arrives at scratch + m c (on the weighted two-rank path window by window at the
// start of the scratch space, and the combination is the weighted all-reduce).
ncclResult_t Schedule::exchangeLevel(int d) {
  const std::vector<int> keep = keptPieces(p_, rank_, d, false);
  std::vector<Span> sends;
  for (int j : keptPieces(p_, rank_, d, true)) sends.push_back({at(pc_.lo(j)), pc_.size(j)});
  std::vector<Kept> kept;
  for (size_t m = 0; m < keep.size(); ++m)
    kept.push_back({pc_.lo(keep[m]), pc_.hi(keep[m]), scratch_ + m * pc_.c * es_});
  const bool lower = (rank_ & d) == 0;
  RINGCC_CHECK(exchangeWithProducts(rank_ ^ d, sends, kept, lower, weighted_));
  if (weighted_) return weightedAllReduce();
  return combinePair(kept, lower, d);
}

// The two-rank path after its products (weightedPair): their sum over both ranks, the
// coefficients, then per segment an all-reduce in place that scales this rank's vector by its
// coefficient (rank 0 holds a, rank 1 b), in the datatype: ca a + cb b with the coefficients
// rounded to the type, each product rounded, then the sum.
ncclResult_t Schedule::weightedAllReduce() {
  RINGCC_CHECK(gatherDots());
  RINGCC_CHECK(coefficients(table_, 0, 2));
  const auto* c = reinterpret_cast<const AdasumCoefficients*>(coefficients_);
  std::vector<CollArgs> ops;
  segs_.forEachIn(0, pc_.count, [&](size_t seg, size_t b, size_t e) {
    const double scale = rank_ == 0 ? c[seg].a : c[seg].b;
    CollArgs a = collArgs(Coll::AllReduce, at(b), at(b), e - b, type_, 0, comm_, stream_);
    const uint64_t bits = scalarBits(type_, scale);
    a.redOp = makePreMulSum(type_, &bits, /*deviceResident=*/false);
    ops.push_back(a);
  });
  return submit(ops);
}

// Every rank's products into the table, row r rank r's (extra ranks send zeros, never summed).
ncclResult_t Schedule::gatherDots() {
  const size_t doubles = 3 * segs_.size();
  return submit({collArgs(Coll::AllGather, dots_, table_, doubles, ncclFloat64, 0, comm_, stream_)});
}

// The products (into dots_) or the combination (in place, with coefficients_) over the kept
// ranges, a segment's part of a range per task. `lower`: this rank holds v_s, the partner's
// copy is v_{s+d}.
ncclResult_t Schedule::overRanges(uint32_t step, const std::vector<Kept>& kept, bool lower) {
  AdasumArgs args;
  args.step = step;
  args.datatype = static_cast<uint32_t>(type_);
  args.dots = reinterpret_cast<uint64_t>(dots_);
  args.coefficients = reinterpret_cast<uint64_t>(coefficients_);
  ncclResult_t rc = ncclSuccess;
  for (const Kept& k : kept)
    segs_.forEachIn(k.lo, k.hi, [&](size_t seg, size_t b, size_t e) {
      if (rc != ncclSuccess) return;
      if (args.ntasks == kAdasumMaxTasks) {
        rc = runStep(args);
        args.ntasks = 0;
      }
      const auto own = reinterpret_cast<uint64_t>(at(b));
      const auto theirs = reinterpret_cast<uint64_t>(k.theirs + (b - k.lo) * es_);
      AdasumTask& t = args.tasks[args.ntasks++];
      t.a = lower ? own : theirs;
      t.b = lower ? theirs : own;
      t.out = own;
      t.n = e - b;
      t.segment = static_cast<uint32_t>(seg);
    });
  if (rc == ncclSuccess && args.ntasks > 0) rc = runStep(args);
  return rc;
}

// coefficients_ from rows [first, first + count) of `rows` (a table of products per segment).
ncclResult_t Schedule::coefficients(const char* rows, uint32_t first, uint32_t count) {
  AdasumArgs args;
  args.step = kAdasumCoefficients;
  args.segments = static_cast<uint32_t>(segs_.size());
  args.firstRow = first;
  args.rows = count;
  args.dots = reinterpret_cast<uint64_t>(rows);
  args.coefficients = reinterpret_cast<uint64_t>(coefficients_);
  return runStep(args);
}

// After the products (exchangeWithProducts): their sum (over the 2d ranks of this rank's
// block; d == 0: this rank's alone), coefficients, the combination in place.
ncclResult_t Schedule::combinePair(const std::vector<Kept>& kept, bool lower, int d) {
  if (d == 0) {
    RINGCC_CHECK(coefficients(dots_, 0, 1));
  } else {
    RINGCC_CHECK(gatherDots());
    const int block = 2 * d;
    RINGCC_CHECK(coefficients(table_, static_cast<uint32_t>(rank_ & ~(block - 1)),
                              static_cast<uint32_t>(block)));
  }
  return overRanges(kAdasumCombine, kept, lower);
}

// Phase 3 with n == p: rank r's piece r to every rank, over the ring.
ncclResult_t Schedule::ringGather() {
  std::vector<CollArgs> ops;
  if (pc_.c > 0)
    ops.push_back(collArgs(Coll::AllGather, at(pc_.lo(rank_)), work_, pc_.c, type_, 0, comm_,
                           stream_));
  const size_t tail = pc_.count - static_cast<size_t>(p_) * pc_.c;
  if (tail > 0)
    ops.push_back(collArgs(Coll::Broadcast, at(pc_.count - tail), at(pc_.count - tail), tail,
                           type_, p_ - 1, comm_, stream_));
  return submit(ops);
}

// Phase 3 otherwise: the pieces travel back pairwise, the last level's first.
ncclResult_t Schedule::pairwiseGather() {
  for (int d = p_ / 2; d >= 1; d >>= 1) {
    std::vector<Span> sends, recvs;
    for (int j : keptPieces(p_, rank_, d, false)) sends.push_back({at(pc_.lo(j)), pc_.size(j)});
    for (int j : keptPieces(p_, rank_, d, true)) recvs.push_back({at(pc_.lo(j)), pc_.size(j)});
    RINGCC_CHECK(exchange(rank_ ^ d, sends, recvs));
  }
  return ncclSuccess;
}

ncclResult_t Schedule::run() {
  const bool extra = rank_ >= p_;      // hands its vector to rank - p
  const bool host = rank_ < n_ - p_;   // combines rank + p's vector first
  if (extra) {
    // Its part in every level's gather of products is a row of zeros nobody sums.
    RINGCC_CHECK(exchangeWithProducts(rank_ - p_, {{work_, pc_.count}}, /*kept=*/{},
                                      /*lower=*/true, /*rolling=*/false));
    for (int d = 1; d < p_; d <<= 1) RINGCC_CHECK(gatherDots());
    return exchange(rank_ - p_, {}, {{work_, pc_.count}});
  }
  if (host) {
    const std::vector<Kept> whole = {{0, pc_.count, scratch_}};
    RINGCC_CHECK(exchangeWithProducts(rank_ + p_, {}, whole, /*lower=*/true, /*rolling=*/false));
    RINGCC_CHECK(combinePair(whole, /*lower=*/true, /*d=*/0));
  }
  for (int d = 1; d < p_; d <<= 1) RINGCC_CHECK(exchangeLevel(d));
  if (weighted_) return ncclSuccess;  // the weighted all-reduce left the result everywhere
  if (n_ == p_) return ringGather();
  RINGCC_CHECK(pairwiseGather());
  if (host) RINGCC_CHECK(exchange(rank_ + p_, {{work_, pc_.count}}, {}));
  return ncclSuccess;
}

}  // namespace

ncclResult_t adasumAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                             ncclDataType_t datatype, const size_t* segments, int nsegments,
                             ncclComm* comm, cudaStream_t stream) {
  if (count == 0) return ncclSuccess;
  const std::unique_ptr<AdasumLocal> local = adasumLocal(comm, stream);
  if (local == nullptr)
    return fail(ncclInternalError, "ringccAllReduceAdasum",
                "a CUDA communicator without the CUDA engine");
  RINGCC_CHECK(local->copy(recvbuff, sendbuff, count * dataTypeSize(datatype)));
  if (comm->nranks == 1) return ncclSuccess;
  const Segments segs(segments, nsegments, count);
  const CallShape shape(*comm, *local, count, dataTypeSize(datatype), segs.size());
  char* workspace = nullptr;
  RINGCC_CHECK(local->acquireWorkspace(shape.layout.total, &workspace));
  ncclResult_t rc = ncclSuccess;
  if (local->preparesFirst()) {
    // Every batch's connections and uploads first, on every rank (docs/adasum.md, "CUDA").
    Schedule prepare(static_cast<char*>(recvbuff), workspace, count, datatype, segs, shape, comm,
                     stream, local.get(), /*prepareOnly=*/true);
    rc = prepare.run();
    if (rc == ncclSuccess) rc = comm->bootstrap->barrier();
  }
  if (rc == ncclSuccess) {
    Schedule schedule(static_cast<char*>(recvbuff), workspace, count, datatype, segs, shape,
                      comm, stream, local.get(), /*prepareOnly=*/false);
    rc = schedule.run();
  }
  // Released on failure too: on a CUDA stream the free waits for whatever was queued.
  const ncclResult_t released = local->releaseWorkspace(workspace);
  return rc != ncclSuccess ? rc : released;
}

}  // namespace ringcc
