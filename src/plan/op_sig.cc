#include "src/plan/op_sig.h"

#include <cstdio>
#include <cstring>

#include "nccl.h"
#include "src/sched/builders.h"

namespace ringcc {
namespace {

// The two words of an OpSig, copied with atomic loads and stores (the peer may read while we
// write; the seqlock discards such reads).
void storeSig(OpSig* dst, const OpSig& src) {
  uint64_t w[2];
  std::memcpy(w, &src, sizeof(w));
  auto* d = reinterpret_cast<uint64_t*>(dst);
  __atomic_store_n(&d[0], w[0], __ATOMIC_RELAXED);
  __atomic_store_n(&d[1], w[1], __ATOMIC_RELAXED);
}

OpSig loadSig(const OpSig* src) {
  const auto* s = reinterpret_cast<const uint64_t*>(src);
  uint64_t w[2] = {__atomic_load_n(&s[0], __ATOMIC_RELAXED),
                   __atomic_load_n(&s[1], __ATOMIC_RELAXED)};
  OpSig sig;
  std::memcpy(&sig, w, sizeof(sig));
  return sig;
}

int sideIndex(ConnSide side) { return side == ConnSide::Send ? 1 : 0; }

}  // namespace

const char* typeName(uint8_t type) {
  static const char* const kNames[ncclNumTypes] = {
      "int8",    "uint8",   "int32",   "uint32",   "int64",      "uint64",
      "float16", "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2"};
  return type < ncclNumTypes ? kNames[type] : "unknown type";
}

const char* opName(uint8_t op) {
  static const char* const kNames[ncclNumOps + 1] = {"sum", "prod", "max",
                                                     "min", "avg",  "a PreMulSum"};
  return op <= ncclNumOps ? kNames[op] : "unknown op";
}

void postCall(const Connector& conn, uint64_t seq, const OpSig& sig) {
  PostedCall& p = conn.view().control->posted[sideIndex(conn.side())];
  __atomic_store_n(&p.seq, uint64_t{0}, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  storeSig(&p.sig, sig);
  __atomic_store_n(&p.seq, seq, __ATOMIC_RELEASE);
}

bool peerPostedCall(const Connector& conn, PostedCall* out) {
  const ConnSide other = conn.side() == ConnSide::Send ? ConnSide::Recv : ConnSide::Send;
  const PostedCall& p = conn.view().control->posted[sideIndex(other)];
  const uint64_t before = __atomic_load_n(&p.seq, __ATOMIC_ACQUIRE);
  out->sig = loadSig(&p.sig);
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  out->seq = __atomic_load_n(&p.seq, __ATOMIC_RELAXED);
  return before != 0 && before == out->seq;
}

std::string describeCall(const OpSig& sig) {
  char text[160];
  const unsigned long long count = static_cast<unsigned long long>(sig.count);
  if (sig.coll == static_cast<uint8_t>(Coll::Send) ||
      sig.coll == static_cast<uint8_t>(Coll::Recv)) {
    std::snprintf(text, sizeof(text), "send/recv of %llu bytes", count);
    return text;
  }
  const char* name = sig.coll <= static_cast<uint8_t>(Coll::Scatter)
                         ? collName(static_cast<Coll>(sig.coll))
                         : "an unknown collective";
  int n = std::snprintf(text, sizeof(text), "%s(%llu x %s", name, count, typeName(sig.type));
  if (sig.op != kSigNoOp && n > 0 && n < static_cast<int>(sizeof(text)))
    n += std::snprintf(text + n, sizeof(text) - n, ", %s", opName(sig.op));
  if (sig.root >= 0 && n > 0 && n < static_cast<int>(sizeof(text)))
    n += std::snprintf(text + n, sizeof(text) - n, ", root %d", sig.root);
  if (n > 0 && n < static_cast<int>(sizeof(text))) std::snprintf(text + n, sizeof(text) - n, ")");
  return text;
}

}  // namespace ringcc
