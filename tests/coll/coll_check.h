// Exact data for multi-rank collective tests: inputs whose reduction is the same in every
// order, the reference result the library must produce bit for bit, and guarded buffers
// that catch writes outside the range an operation may touch.
//
// Inputs (genElem) are a pure function of (spec, rank, index), so every rank, thread or
// forked process derives the same data and the same expected result. Per op class:
//
//   copies (no op)    random bytes: NaN payloads, Infs and -0 must survive a copy untouched
//   sum               integers: random bits (wrapping arithmetic is order-free);
//                     floats: integers in [-M, M], M = exactLimit / nranks, so every partial
//                     sum is an integer the type holds exactly (fp8 e5m2 over 8 ranks: -1..1)
//   prod              integers -3..3 (unsigned 0..3), floats +-0.5, +-1, +-2: every partial
//                     product is a power of two the type holds (2^8 at 8 ranks fits e4m3)
//   max, min          integers: random bits; floats: random finite bit patterns (-0 included:
//                     max(-0, +0) = +0 and min = -0 in either order, as the library promises)
//   premulsum         integers: random bits times the scalar (wrapping); floats: integers
//                     in [-M, M] with M = exactLimit / (nranks * max(1, |scalar|)) and power
//                     of two scalars, so x * scalar and all partial sums are exact
//   avg               integers: sum, then divide truncating toward zero (NCCL's rule); values
//                     in [-max/n, max/n] so the sum does not wrap.
//                     floats: each input is multiplied by s = 1/n rounded to the type (NCCL's
//                     rule), then summed. With n a power of two s is exact and the sums are
//                     as for sum. Otherwise a sum of rounded products depends on its order, so
//                     each element is one of two exact patterns: only one rank (the "owner")
//                     holds a non-zero value (result: x * s rounded, whatever the order), or,
//                     for n <= 3 only, every rank holds the same value a (every summation
//                     order of three equal terms is (p + p) + p with p = a * s rounded; 2p is
//                     exact, so the result is 3p rounded once).
//
// The reference (reduceInto) folds the ranks' inputs in rank order with those same rules;
// since the inputs make the reduction order-free, it is the bit pattern every rank must get.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nccl.h"

namespace ringcc::test {

// ---- datatypes and ops ------------------------------------------------------------------

inline constexpr ncclDataType_t kAllTypes[] = {
    ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,   ncclInt64,      ncclUint64,
    ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};

enum class Op { Copy, Sum, Prod, Max, Min, Avg, PreMulHost, PreMulDevice };
inline constexpr Op kReduceOps[] = {Op::Sum, Op::Prod,       Op::Max,         Op::Min,
                                    Op::Avg, Op::PreMulHost, Op::PreMulDevice};

const char* typeName(ncclDataType_t type);
const char* opName(Op op);
size_t typeSize(ncclDataType_t type);
bool typeIsFloat(ncclDataType_t type);

// ---- data -------------------------------------------------------------------------------

struct DataSpec {
  ncclDataType_t type = ncclFloat32;
  Op op = Op::Copy;
  int nranks = 1;
  uint64_t seed = 1;
  double scalar = 0;  // PreMul*: the scalar (an integer for integer types)
};

// The PreMulSum scalar this spec uses by default for `op`: host-immediate -2 (floats) / 3
// (integers), device-resident 0.5 / 5. Powers of two keep float products exact.
double defaultScalar(Op op, ncclDataType_t type);

// Element `index` of rank `rank`'s input, written to `out` (typeSize bytes).
void genElem(const DataSpec& spec, int rank, uint64_t index, void* out);
// Elements [first, first + count) of rank `rank`'s input.
void genInput(const DataSpec& spec, int rank, uint64_t first, size_t count, void* out);
// out[k] = reduction over ranks b of inputs[b][first + k], as the library must compute it.
// inputs has spec.nranks entries.
void reduceInto(const DataSpec& spec, const std::vector<const uint8_t*>& inputs, size_t first,
                size_t count, void* out);
// The scalar's bytes in spec.type, for ncclRedOpCreatePreMulSum (8 bytes suffice).
void scalarBytes(const DataSpec& spec, void* out);
// Random bytes that no operation produces by accident (buffer filler).
void fillGarbage(uint64_t seed, void* out, size_t bytes);
// One element as "0x.. (value)" for failure messages.
std::string describeElem(ncclDataType_t type, const void* elem);

// ---- guarded buffers --------------------------------------------------------------------

// A byte buffer with guard zones either side. `expect` starts as a copy of the initial
// content and the test overwrites the ranges an operation must write; afterwards every byte
// (guards included) must equal `expect`, so stray writes anywhere are caught.
// Where regions made from now on keep their bytes: the heap, or ncclMemAlloc (memory that
// processes on one host map from each other: the Direct protocol's mapped references).
void setRegionsFromNcclMemAlloc(bool on);

struct RegionAlloc {
  using value_type = uint8_t;
  template <class U>
  struct rebind {  // only ever to uint8_t itself
    using other = RegionAlloc;
  };
  bool fromNccl;  // fixed when made: deallocate frees the same way
  RegionAlloc();
  uint8_t* allocate(size_t n);
  void deallocate(uint8_t* p, size_t n);
  bool operator==(const RegionAlloc& o) const { return fromNccl == o.fromNccl; }
};

struct Region {
  static constexpr size_t kGuard = 256;
  std::vector<uint8_t, RegionAlloc> bytes;
  std::vector<uint8_t> expect;
  std::string role;  // "sendbuff", "recvbuff", ... for messages
  ncclDataType_t type = ncclInt8;

  Region(std::string role, size_t size, ncclDataType_t type, uint64_t seed);
  uint8_t* data() { return bytes.data() + kGuard; }
  uint8_t* expected() { return expect.data() + kGuard; }
  size_t size() const { return bytes.size() - 2 * kGuard; }
  void snapshot() { expect.assign(bytes.begin(), bytes.end()); }  // after the initial fill
  // "" if the region matches, else where and how it differs first.
  std::string compare() const;
};

// What one rank passes to one operation, and what its buffers must hold afterwards.
struct RankRun {
  std::vector<std::unique_ptr<Region>> regions;
  std::string check() const;  // "" or the first difference, region by region
  Region* add(std::string role, size_t size, ncclDataType_t type, uint64_t seed) {
    regions.push_back(std::make_unique<Region>(std::move(role), size, type, seed));
    return regions.back().get();
  }
};

// ---- collectives ------------------------------------------------------------------------

enum class Coll {
  AllReduce,
  Broadcast,
  Bcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AlltoAll,
  Gather,
  Scatter
};
inline constexpr Coll kAllColls[] = {Coll::AllReduce, Coll::Broadcast, Coll::Bcast,
                                     Coll::Reduce,    Coll::AllGather, Coll::ReduceScatter,
                                     Coll::AlltoAll,  Coll::Gather,    Coll::Scatter};
const char* collName(Coll coll);
bool collReduces(Coll coll);
bool collRooted(Coll coll);

struct CollCase {
  Coll coll = Coll::AllReduce;
  ncclDataType_t type = ncclFloat32;
  Op op = Op::Sum;   // ignored (Copy) for the collectives that do not reduce
  size_t count = 0;  // the API's count (per rank block for the blocked collectives)
  int root = 0;
  bool inPlace = false;     // NCCL's layouts; all-to-all has none and runs out of place
  bool nullUnused = false;  // pass nullptr for the buffers a rank need not supply
  uint64_t seed = 1;
  double scalar = 0;  // PreMul*: 0 = defaultScalar
  std::string describe(int nranks) const;
};

// Every rank's input and the reduced result of one case, computed once and shared.
struct CaseData {
  CollCase c;
  int nranks = 1;
  DataSpec spec;
  std::vector<std::vector<uint8_t>> input;  // input[b]: rank b's send buffer content
  std::vector<uint8_t> reduced;             // reducing collectives: the reduction of input[.]
  CaseData(const CollCase& c, int nranks);
  size_t sendElems() const;
  size_t recvElems() const;
};

// One rank's part of a case: its buffers (with their expected final content) and the call.
class CollRank {
 public:
  // `comm` is only used to create the PreMulSum op (destroyed with this object).
  CollRank(const CaseData& data, int rank, ncclComm_t comm);
  ~CollRank();
  CollRank(const CollRank&) = delete;
  CollRank& operator=(const CollRank&) = delete;

  // Enqueues the collective (blocking outside a group) on `stream` (default: none, the legacy
  // stream of CUDA communicators; ranks sharing one GPU need a stream each).
  ncclResult_t issue();
  void setStream(cudaStream_t stream) { stream_ = stream; }
  std::string check() const { return run_.check(); }

 private:
  const CaseData& data_;
  int rank_;
  ncclComm_t comm_;
  RankRun run_;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  ncclRedOp_t op_ = ncclSum;
  cudaStream_t stream_ = nullptr;
  bool userOp_ = false;
  alignas(8) uint8_t scalar_[8] = {};  // device-resident scalar lives here
};

}  // namespace ringcc::test
