#include "src/base/param_query.h"

#include <cstring>

#include "src/base/error.h"

namespace ringcc {
namespace {

// `key` without a leading `prefix`, or nullptr if it does not start with it.
const char* stripPrefix(const char* key, const char* prefix) {
  const size_t n = std::strlen(prefix);
  return std::strncmp(key, prefix, n) == 0 ? key + n : nullptr;
}

}  // namespace

std::string paramKey(const ParamDef& def) { return std::string("NCCL_") + def.name; }

const std::vector<std::string>& paramKeys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k;
    for (const ParamDef& def : paramTable()) k.push_back(paramKey(def));
    return k;
  }();
  return keys;
}

ncclResult_t bindParam(const char* key, const char* where, const ParamDef** out) {
  *out = nullptr;
  const char* name = key;
  if (const char* rest = stripPrefix(key, "NCCL_"))
    name = rest;
  else if (const char* rest2 = stripPrefix(key, "RINGCC_"))
    name = rest2;
  const ParamDef* def = findParam(name);
  if (def == nullptr)
    return fail(ncclInvalidArgument, where,
                "key \"%s\" is not a parameter of ringcc (ncclParamGetAllParameterKeys lists "
                "them; docs/env.md describes them)",
                key);
  *out = def;
  return ncclSuccess;
}

std::string paramText(const ParamDef& def) { return paramString(def.name); }

ncclResult_t readIntParam(const ParamDef& def, int64_t lo, uint64_t hi, const char* type,
                          const char* where, int64_t* out) {
  const std::string key = paramKey(def);
  if (def.kind != ParamKind::Int)
    return fail(ncclInvalidArgument, where,
                "%s is a text parameter, not an integer: read it with ncclParamGetStr",
                key.c_str());
  // paramInt falls back to the default (with a WARN) on a malformed value, as init would.
  const int64_t v = paramInt(def.name);
  if (v < lo || (v >= 0 && static_cast<uint64_t>(v) > hi))
    return fail(ncclInvalidArgument, where, "%s is %lld, which does not fit %s", key.c_str(),
                static_cast<long long>(v), type);
  *out = v;
  return ncclSuccess;
}

}  // namespace ringcc
