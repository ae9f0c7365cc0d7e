// Adasum over send/recv. With n ranks and p the largest power of two <= n:
//
//   1. ranks p..n-1 hand their vector to rank r - p, which combines the two whole vectors;
//   2. for d = 1, 2, ..., p/2, rank r and its partner r ^ d (both holding the same range of
//      elements: the lower one a piece of v_s, the upper one of v_{s+d}) exchange halves of
//      that range; each keeps one half (lower rank: the first), sums the three products of its
//      half with those of the other ranks sharing v_s and v_{s+d} (the 2d ranks of its block,
//      by recursive doubling), and combines its half in place;
//   3. the halves travel back (distance-halving all-gather), and rank r - p sends the result
//      on to rank r.
//
// Every rank sends about 2 * count elements in all, as a ring all-reduce does. Products are
// summed pairwise and x + y == y + x, so every rank of a block gets the same bits: the
// coefficients of one vector pair are the same everywhere.
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

CollArgs p2pArgs(Coll kind, const void* send, void* recv, size_t count, ncclDataType_t type,
                 int peer, ncclComm* comm) {
  CollArgs a;
  a.kind = kind;
  a.sendbuff = send;
  a.recvbuff = recv;
  a.count = count;
  a.datatype = type;
  a.redOp = makeRedOp(ncclSum, type, comm->nranks);
  a.root = peer;
  a.comm = comm;
  return a;
}

// One grouped send to and receive from `peer`; an empty side is left out (both ranks of a
// pair agree on the counts, so the two sides match).
ncclResult_t exchange(ncclComm* comm, ncclDataType_t type, int peer, const void* send,
                      size_t sendCount, void* recv, size_t recvCount) {
  RINGCC_CHECK(groupStart());
  ncclResult_t rc = ncclSuccess;
  if (sendCount > 0) rc = enqueueOp(p2pArgs(Coll::Send, send, nullptr, sendCount, type, peer, comm));
  if (rc == ncclSuccess && recvCount > 0)
    rc = enqueueOp(p2pArgs(Coll::Recv, nullptr, recv, recvCount, type, peer, comm));
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

// Sums `dots` over the 2d ranks of this rank's block (ranks agreeing above bit d).
ncclResult_t sumOverBlock(ncclComm* comm, int rank, int d, std::vector<AdasumDots>* dots) {
  static_assert(sizeof(AdasumDots) == 3 * sizeof(double), "sent as doubles");
  std::vector<AdasumDots> theirs(dots->size());
  for (int m = 1; m <= d; m <<= 1) {
    RINGCC_CHECK(exchange(comm, ncclFloat64, rank ^ m, dots->data(), 3 * dots->size(),
                          theirs.data(), 3 * theirs.size()));
    for (size_t k = 0; k < dots->size(); ++k) {
      (*dots)[k].ab += theirs[k].ab;
      (*dots)[k].aa += theirs[k].aa;
      (*dots)[k].bb += theirs[k].bb;
    }
  }
  return ncclSuccess;
}

// Elements [first, ...) of a vector, stored from `base`: the user's buffer holds all of it
// (first 0), a received half starts at the half's first element.
template <class T>
struct Part {
  T* base;
  size_t first;
  T* at(size_t i) const { return base + (i - first); }
};

// dots[k] = the products of a and b over segment k's part inside [lo, hi).
template <class T>
void accumulateRange(const Segments& segs, std::vector<AdasumDots>* dots, Part<const T> a,
                     Part<const T> b, size_t lo, size_t hi) {
  dots->assign(segs.size(), AdasumDots{});
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

struct Level {
  int d;
  bool lower;             // this rank is the pair's lower one: it keeps the first half
  size_t lo, hi;          // the range this rank and its partner held before the level
  size_t keepLo, keepHi;  // the half this rank keeps
};

template <class T>
ncclResult_t runAdasum(T* work, size_t count, ncclDataType_t type, const Segments& segs,
                       ncclComm* comm) {
  const int n = comm->nranks, rank = comm->rank;
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const bool extra = rank >= p;    // hands its vector to rank - p
  const bool host = rank < n - p;  // combines rank + p's vector first
  // Received halves (and, on a host of an extra rank, a whole vector).
  const size_t scratchElems = host ? count : (count + 1) / 2;
  if (comm->hostScratch.size() < scratchElems * sizeof(T))
    comm->hostScratch.resize(scratchElems * sizeof(T));
  T* const scratch = reinterpret_cast<T*>(comm->hostScratch.data());
  std::vector<AdasumDots> dots;
  const Part<T> mine{work, 0};

  if (extra) {
    RINGCC_CHECK(exchange(comm, type, rank - p, work, count, nullptr, 0));
    return exchange(comm, type, rank - p, nullptr, 0, work, count);
  }
  if (host) {
    RINGCC_CHECK(exchange(comm, type, rank + p, nullptr, 0, scratch, count));
    const Part<const T> a{work, 0}, b{scratch, 0};
    accumulateRange(segs, &dots, a, b, 0, count);
    combineRange(segs, dots, mine, a, b, 0, count);
  }

  std::vector<Level> levels;
  size_t lo = 0, hi = count;
  for (int d = 1; d < p; d <<= 1) {
    const size_t mid = lo + (hi - lo) / 2;
    const bool lower = (rank & d) == 0;
    Level l{d, lower, lo, hi, lower ? lo : mid, lower ? mid : hi};
    const size_t giveLo = lower ? mid : lo, giveHi = lower ? hi : mid;
    RINGCC_CHECK(exchange(comm, type, rank ^ d, work + giveLo, giveHi - giveLo,
                          scratch, l.keepHi - l.keepLo));
    const Part<const T> own{work, 0}, theirs{scratch, l.keepLo};  // my half, 2 copies
    const Part<const T> a = lower ? own : theirs;  // v_s, held by the lower rank of the pair
    const Part<const T> b = lower ? theirs : own;  // v_{s+d}
    accumulateRange(segs, &dots, a, b, l.keepLo, l.keepHi);
    RINGCC_CHECK(sumOverBlock(comm, rank, d, &dots));
    combineRange(segs, dots, mine, a, b, l.keepLo, l.keepHi);
    levels.push_back(l);
    lo = l.keepLo;
    hi = l.keepHi;
  }

  for (auto l = levels.rbegin(); l != levels.rend(); ++l) {
    const size_t otherLo = l->lower ? l->keepHi : l->lo;  // the partner's half
    const size_t otherHi = l->lower ? l->hi : l->keepLo;
    RINGCC_CHECK(exchange(comm, type, rank ^ l->d, work + l->keepLo, l->keepHi - l->keepLo,
                          work + otherLo, otherHi - otherLo));
  }
  if (host) RINGCC_CHECK(exchange(comm, type, rank + p, work, count, nullptr, 0));
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
