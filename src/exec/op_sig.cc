#include "src/exec/op_sig.h"

#include <cstdio>

#include "nccl.h"
#include "src/sched/builders.h"

namespace ringcc {
namespace {

const char* typeName(uint8_t type) {
  static const char* const kNames[ncclNumTypes] = {
      "int8",    "uint8",   "int32",    "uint32",     "int64",     "uint64",
      "float16", "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2"};
  return type < ncclNumTypes ? kNames[type] : "unknown type";
}

const char* opName(uint8_t op) {
  static const char* const kNames[ncclNumOps + 1] = {"sum", "prod", "max", "min", "avg",
                                                     "a PreMulSum"};
  return op <= ncclNumOps ? kNames[op] : "unknown op";
}

}  // namespace

std::string describeCall(const OpSig& sig) {
  char text[160];
  const unsigned long long count = static_cast<unsigned long long>(sig.count);
  if (sig.coll == static_cast<uint8_t>(Coll::Send) || sig.coll == static_cast<uint8_t>(Coll::Recv)) {
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
  if (n > 0 && n < static_cast<int>(sizeof(text)))
    std::snprintf(text + n, sizeof(text) - n, ")");
  return text;
}

}  // namespace ringcc
