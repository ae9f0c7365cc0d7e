// Adasum over the engine's collectives. With n ranks and p the largest power of two <= n:
//
//   1. ranks p..n-1 hand their vector to rank r - p, which combines the two whole vectors;
//   2. the vector is cut into p pieces (piece j: [j c, (j + 1) c), c = count / p, the last
//      piece also takes the count % p left over). For d = 1, 2, ..., p/2, rank r and its
//      partner r ^ d hold the same pieces (those j with j = r mod d; the lower rank its copy of
//      v_s, the upper one of v_{s+d}); they exchange half of them, each keeping the pieces j
//      whose bit d is its own (the pieces are strided, not one contiguous half, so that rank r
//      ends up with piece r), sums the three products of its pieces with those of the other
//      ranks sharing v_s and v_{s+d} (the 2d ranks of its block, by recursive doubling), and
//      combines its pieces in place;
//   3. with n == p, one ring all-gather in place (rank r's piece sits at r c, as ncclAllGather
//      lays it out) and a broadcast of the few left-over elements from rank p - 1; otherwise
//      the pieces travel back pairwise (distance-halving) and rank r - p sends the result on
//      to rank r.
//
// Every rank sends about 2 * count elements in all, as a ring all-reduce does. The last
// phase runs on the ring's connections and pipeline, whose slots are 4 times the p2p ones,
// in one call instead of log2(p) (what it measured: docs/benchmarks.md, "Adasum: strided
// pieces"). Products are summed pairwise and
// x + y == y + x, so every rank of a block gets the same bits: the coefficients of one vector
// pair are the same everywhere.
#include "src/adasum/adasum.h"

#include <algorithm>
#include <vector>

#include "kernels/adasum.h"
#include "kernels/dtypes.h"
#include "src/base/error.h"
#include "src/core/comm.h"
#include "src/exec/group.h"
#include "src/plan/coll_args.h"

namespace ringcc {
namespace {

CollArgs collArgs(Coll kind, const void* send, void* recv, size_t count, ncclDataType_t type,
                  int root, ncclComm* comm) {
  CollArgs a;
  a.kind = kind;
  a.sendbuff = send;
  a.recvbuff = recv;
  a.count = count;
  a.datatype = type;
  a.redOp = makeRedOp(ncclSum, type, comm->nranks);
  a.root = root;
  a.comm = comm;
  return a;
}

// A range of elements to send or receive: `count` elements at `buf`.
struct Span {
  void* buf;
  size_t count;
};

// One group of sends to and receives from `peer`; empty ones are left out (both ranks of a
// pair agree on the counts, so the two sides match).
ncclResult_t exchange(ncclComm* comm, ncclDataType_t type, int peer, const std::vector<Span>& sends,
                      const std::vector<Span>& recvs) {
  RINGCC_CHECK(groupStart());
  ncclResult_t rc = ncclSuccess;
  for (const Span& s : sends)
    if (rc == ncclSuccess && s.count > 0)
      rc = enqueueOp(collArgs(Coll::Send, s.buf, nullptr, s.count, type, peer, comm));
  for (const Span& r : recvs)
    if (rc == ncclSuccess && r.count > 0)
      rc = enqueueOp(collArgs(Coll::Recv, nullptr, r.buf, r.count, type, peer, comm));
  ncclResult_t end = groupEnd();
  return rc != ncclSuccess ? rc : end;
}

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

// The pieces rank `rank` keeps at level d: those it held (j = rank mod d) whose bit d is its
// own, in increasing order; `other` gives the ones its partner keeps.
std::vector<int> keptPieces(int p, int rank, int d, bool other) {
  std::vector<int> out;
  const int first = (rank & (d - 1)) | ((rank & d) ^ (other ? d : 0));
  for (int j = first; j < p; j += 2 * d) out.push_back(j);
  return out;
}

// Sums `dots` over the 2d ranks of this rank's block (ranks agreeing above bit d).
ncclResult_t sumOverBlock(ncclComm* comm, int rank, int d, std::vector<AdasumDots>* dots) {
  static_assert(sizeof(AdasumDots) == 3 * sizeof(double), "sent as doubles");
  std::vector<AdasumDots> theirs(dots->size());
  for (int m = 1; m <= d; m <<= 1) {
    RINGCC_CHECK(exchange(comm, ncclFloat64, rank ^ m, {{dots->data(), 3 * dots->size()}},
                          {{theirs.data(), 3 * theirs.size()}}));
    for (size_t k = 0; k < dots->size(); ++k) {
      (*dots)[k].ab += theirs[k].ab;
      (*dots)[k].aa += theirs[k].aa;
      (*dots)[k].bb += theirs[k].bb;
    }
  }
  return ncclSuccess;
}

// Elements [first, ...) of a vector, stored from `base`: the user's buffer holds all of it
// (first 0), a received piece starts at the piece's first element.
template <class T>
struct Part {
  T* base;
  size_t first;
  T* at(size_t i) const { return base + (i - first); }
};

// dots[k] += the products of a and b over segment k's part inside [lo, hi).
template <class T>
void accumulateRange(const Segments& segs, std::vector<AdasumDots>* dots, Part<const T> a,
                     Part<const T> b, size_t lo, size_t hi) {
  segs.forEachIn(lo, hi, [&](size_t k, size_t s, size_t e) {
    adasumAccumulate(a.at(s), b.at(s), e - s, &(*dots)[k]);
  });
}

// out[lo, hi) = the combination of a and b, segment by segment, with products already summed
// over the whole vectors in `dots`.
template <class T>
void combineRange(const Segments& segs, const std::vector<AdasumDots>& dots, Part<T> out,
                  Part<const T> a, Part<const T> b, size_t lo, size_t hi) {
  segs.forEachIn(lo, hi, [&](size_t k, size_t s, size_t e) {
    adasumCombine(out.at(s), a.at(s), b.at(s), e - s, adasumCoefficients(dots[k]));
  });
}

// A range this rank keeps at a level of the halving phase, and where the partner's copy of
// it arrived.
template <class T>
struct Kept {
  size_t lo, hi;
  const T* theirs;  // element lo of the partner's copy
};

// The exchange of one level with rank ^ d over send/recv: the m-th kept piece arrives at
// scratch + m c.
template <class T>
ncclResult_t exchangePairwise(T* work, T* scratch, const Pieces& pc, ncclDataType_t type,
                              int rank, int d, ncclComm* comm, std::vector<Kept<T>>* kept) {
  const std::vector<int> keep = keptPieces(pc.p, rank, d, false);
  std::vector<Span> sends, recvs;
  for (int j : keptPieces(pc.p, rank, d, true)) sends.push_back({work + pc.lo(j), pc.size(j)});
  for (size_t m = 0; m < keep.size(); ++m) {
    recvs.push_back({scratch + m * pc.c, pc.size(keep[m])});
    kept->push_back({pc.lo(keep[m]), pc.hi(keep[m]), scratch + m * pc.c});
  }
  return exchange(comm, type, rank ^ d, sends, recvs);
}

// The rest of a level, on the ranges this rank keeps: products, their sum over the block,
// the combination in place.
template <class T>
ncclResult_t combineKept(T* work, const std::vector<Kept<T>>& kept, const Segments& segs,
                         int rank, int d, ncclComm* comm) {
  const bool lower = (rank & d) == 0;  // holds v_s; the partner v_{s+d}
  std::vector<AdasumDots> dots(segs.size());
  auto parts = [&](const Kept<T>& k, Part<const T>* a, Part<const T>* b) {
    const Part<const T> own{work, 0}, theirs{k.theirs, k.lo};
    *a = lower ? own : theirs;
    *b = lower ? theirs : own;
  };
  for (const Kept<T>& k : kept) {
    Part<const T> a, b;
    parts(k, &a, &b);
    accumulateRange(segs, &dots, a, b, k.lo, k.hi);
  }
  RINGCC_CHECK(sumOverBlock(comm, rank, d, &dots));
  for (const Kept<T>& k : kept) {
    Part<const T> a, b;
    parts(k, &a, &b);
    combineRange(segs, dots, Part<T>{work, 0}, a, b, k.lo, k.hi);
  }
  return ncclSuccess;
}

// Phase 3 with n == p: rank r's piece r to every rank, over the ring.
template <class T>
ncclResult_t ringGather(T* work, const Pieces& pc, ncclDataType_t type, int rank,
                        ncclComm* comm) {
  RINGCC_CHECK(groupStart());
  ncclResult_t rc = ncclSuccess;
  if (pc.c > 0)
    rc = enqueueOp(collArgs(Coll::AllGather, work + pc.lo(rank), work, pc.c, type, 0, comm));
  const size_t tail = pc.count - static_cast<size_t>(pc.p) * pc.c;
  if (rc == ncclSuccess && tail > 0)
    rc = enqueueOp(collArgs(Coll::Broadcast, work + pc.count - tail, work + pc.count - tail,
                            tail, type, pc.p - 1, comm));
  ncclResult_t end = groupEnd();
  return rc != ncclSuccess ? rc : end;
}

// Phase 3 otherwise: the pieces travel back pairwise, the last level's first.
template <class T>
ncclResult_t pairwiseGather(T* work, const Pieces& pc, ncclDataType_t type, int rank,
                            ncclComm* comm) {
  for (int d = pc.p / 2; d >= 1; d >>= 1) {
    std::vector<Span> sends, recvs;
    for (int j : keptPieces(pc.p, rank, d, false)) sends.push_back({work + pc.lo(j), pc.size(j)});
    for (int j : keptPieces(pc.p, rank, d, true)) recvs.push_back({work + pc.lo(j), pc.size(j)});
    RINGCC_CHECK(exchange(comm, type, rank ^ d, sends, recvs));
  }
  return ncclSuccess;
}

template <class T>
ncclResult_t runAdasum(T* work, size_t count, ncclDataType_t type, const Segments& segs,
                       ncclComm* comm) {
  const int n = comm->nranks, rank = comm->rank;
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const bool extra = rank >= p;    // hands its vector to rank - p
  const bool host = rank < n - p;  // combines rank + p's vector first
  const Pieces pc{p, count, count / p};
  // Received pieces (at most half of them, the last with the left-over) and, on a host of an
  // extra rank, a whole vector.
  const size_t scratchElems = host ? count : count - static_cast<size_t>(p / 2) * pc.c;
  if (comm->hostScratch.size() < scratchElems * sizeof(T))
    comm->hostScratch.resize(scratchElems * sizeof(T));
  T* const scratch = reinterpret_cast<T*>(comm->hostScratch.data());

  if (extra) {
    RINGCC_CHECK(exchange(comm, type, rank - p, {{work, count}}, {}));
    return exchange(comm, type, rank - p, {}, {{work, count}});
  }
  if (host) {
    RINGCC_CHECK(exchange(comm, type, rank + p, {}, {{scratch, count}}));
    const Part<const T> a{work, 0}, b{scratch, 0};
    std::vector<AdasumDots> dots(segs.size());
    accumulateRange(segs, &dots, a, b, 0, count);
    combineRange(segs, dots, Part<T>{work, 0}, a, b, 0, count);
  }
  for (int d = 1; d < p; d <<= 1) {
    std::vector<Kept<T>> kept;
    RINGCC_CHECK(exchangePairwise(work, scratch, pc, type, rank, d, comm, &kept));
    RINGCC_CHECK(combineKept(work, kept, segs, rank, d, comm));
  }
  if (n == p) return ringGather(work, pc, type, rank, comm);
  RINGCC_CHECK(pairwiseGather(work, pc, type, rank, comm));
  if (host) RINGCC_CHECK(exchange(comm, type, rank + p, {{work, count}}, {}));
  return ncclSuccess;
}

}  // namespace

ncclResult_t adasumAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                             ncclDataType_t datatype, const size_t* segments, int nsegments,
                             ncclComm* comm) {
  if (count == 0) return ncclSuccess;
  if (sendbuff != recvbuff) std::copy_n(static_cast<const unsigned char*>(sendbuff),
                                        count * dataTypeSize(datatype),
                                        static_cast<unsigned char*>(recvbuff));
  if (comm->nranks == 1) return ncclSuccess;
  const Segments segs(segments, nsegments, count);
  switch (datatype) {
    case ncclFloat16:
      return runAdasum(static_cast<Half*>(recvbuff), count, datatype, segs, comm);
    case ncclBfloat16:
      return runAdasum(static_cast<BFloat16*>(recvbuff), count, datatype, segs, comm);
    case ncclFloat32:
      return runAdasum(static_cast<float*>(recvbuff), count, datatype, segs, comm);
    case ncclFloat64:
      return runAdasum(static_cast<double*>(recvbuff), count, datatype, segs, comm);
    default:
      return fail(ncclInternalError, "ringccAllReduceAdasum", "datatype %d reached the schedule",
                  static_cast<int>(datatype));
  }
}

}  // namespace ringcc
