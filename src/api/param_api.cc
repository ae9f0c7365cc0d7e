// NCCL's parameter API over ringcc's one parameter table (src/base/param_query.h). A handle
// is the address of the parameter's entry in that table: it lives as long as the process
// and is never freed, as NCCL promises; a pointer that is not one is ncclInvalidArgument.
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "src/api/api.h"
#include "src/base/log.h"
#include "src/base/param_query.h"

using namespace ringcc;

namespace {

ncclParamHandle_t toHandle(const ParamDef* def) {
  return reinterpret_cast<ncclParamHandle_t>(const_cast<ParamDef*>(def));
}

// The entry `h` names, or ncclInvalidArgument naming the argument.
ncclResult_t fromHandle(ncclParamHandle_t h, const char* where, const ParamDef** out) {
  const auto table = paramTable();
  const auto* def = reinterpret_cast<const ParamDef*>(h);
  for (const ParamDef& entry : table)
    if (&entry == def) {
      *out = def;
      return ncclSuccess;
    }
  if (h == nullptr) return fail(ncclInvalidArgument, where, "h is NULL");
  return fail(ncclInvalidArgument, where, "h %p is not a handle from ncclParamBind",
              static_cast<void*>(h));
}

// The typed getters: the value of integer parameter `h`, checked to fit T.
template <typename T>
ncclResult_t getInt(ncclParamHandle_t h, T* out, const char* type, const char* where) {
  const ParamDef* def;
  RINGCC_CHECK(fromHandle(h, where, &def));
  RINGCC_CHECK(checkNotNull(out, "out", where));
  int64_t v;
  RINGCC_CHECK(readIntParam(def[0], std::numeric_limits<T>::min(),
                            static_cast<uint64_t>(std::numeric_limits<T>::max()), type, where, &v));
  *out = static_cast<T>(v);
  return ncclSuccess;
}

}  // namespace

NCCL_API(ncclResult_t, ncclParamBind, ncclParamHandle_t* out, const char* key) {
  const char* where = "ncclParamBind";
  RINGCC_CHECK(checkNotNull(out, "out", where));
  *out = nullptr;
  RINGCC_CHECK(checkNotNull(key, "key", where));
  const ParamDef* def;
  RINGCC_CHECK(bindParam(key, where, &def));
  *out = toHandle(def);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclParamGetI8, ncclParamHandle_t h, int8_t* out) {
  return getInt(h, out, "int8_t", "ncclParamGetI8");
}
NCCL_API(ncclResult_t, ncclParamGetI16, ncclParamHandle_t h, int16_t* out) {
  return getInt(h, out, "int16_t", "ncclParamGetI16");
}
NCCL_API(ncclResult_t, ncclParamGetI32, ncclParamHandle_t h, int32_t* out) {
  return getInt(h, out, "int32_t", "ncclParamGetI32");
}
NCCL_API(ncclResult_t, ncclParamGetI64, ncclParamHandle_t h, int64_t* out) {
  return getInt(h, out, "int64_t", "ncclParamGetI64");
}
NCCL_API(ncclResult_t, ncclParamGetU8, ncclParamHandle_t h, uint8_t* out) {
  return getInt(h, out, "uint8_t", "ncclParamGetU8");
}
NCCL_API(ncclResult_t, ncclParamGetU16, ncclParamHandle_t h, uint16_t* out) {
  return getInt(h, out, "uint16_t", "ncclParamGetU16");
}
NCCL_API(ncclResult_t, ncclParamGetU32, ncclParamHandle_t h, uint32_t* out) {
  return getInt(h, out, "uint32_t", "ncclParamGetU32");
}
NCCL_API(ncclResult_t, ncclParamGetU64, ncclParamHandle_t h, uint64_t* out) {
  return getInt(h, out, "uint64_t", "ncclParamGetU64");
}

NCCL_API(ncclResult_t, ncclParamGetStr, ncclParamHandle_t h, const char** out) {
  const char* where = "ncclParamGetStr";
  const ParamDef* def;
  RINGCC_CHECK(fromHandle(h, where, &def));
  RINGCC_CHECK(checkNotNull(out, "out", where));
  thread_local std::string text;  // valid until this thread's next ncclParamGetStr
  text = paramText(*def);
  *out = text.c_str();
  return ncclSuccess;
}

// Raw bytes: an integer parameter as its int64_t, a text parameter as its characters and the
// terminating NUL. *len is the size the value needs, also when maxLen is too small (which is
// ncclInvalidArgument, and nothing is copied).
NCCL_API(ncclResult_t, ncclParamGet, ncclParamHandle_t h, void* out, int maxLen, int* len) {
  const char* where = "ncclParamGet";
  const ParamDef* def;
  RINGCC_CHECK(fromHandle(h, where, &def));
  RINGCC_CHECK(checkNotNull(len, "len", where));
  std::vector<unsigned char> bytes;
  if (def->kind == ParamKind::Int) {
    int64_t v;
    RINGCC_CHECK(readIntParam(*def, std::numeric_limits<int64_t>::min(),
                              std::numeric_limits<int64_t>::max(), "int64_t", where, &v));
    bytes.resize(sizeof v);
    std::memcpy(bytes.data(), &v, sizeof v);
  } else {
    const std::string text = paramText(*def);
    bytes.assign(text.begin(), text.end());
    bytes.push_back('\0');
  }
  *len = static_cast<int>(bytes.size());
  if (maxLen < *len)
    return fail(ncclInvalidArgument, where, "maxLen %d is too small: %s needs %d bytes", maxLen,
                paramKey(*def).c_str(), *len);
  RINGCC_CHECK(checkNotNull(out, "out", where));
  std::memcpy(out, bytes.data(), bytes.size());
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclParamGetParameter, const char* key, const char** value, int* valueLen) {
  const char* where = "ncclParamGetParameter";
  RINGCC_CHECK(checkNotNull(key, "key", where));
  RINGCC_CHECK(checkNotNull(value, "value", where));
  RINGCC_CHECK(checkNotNull(valueLen, "valueLen", where));
  const ParamDef* def;
  RINGCC_CHECK(bindParam(key, where, &def));
  thread_local std::string text;  // valid until this thread's next ncclParamGetParameter
  text = paramText(*def);
  *value = text.c_str();
  *valueLen = static_cast<int>(text.size());
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclParamGetAllParameterKeys, const char*** table, int* tableLen) {
  const char* where = "ncclParamGetAllParameterKeys";
  RINGCC_CHECK(checkNotNull(table, "table", where));
  RINGCC_CHECK(checkNotNull(tableLen, "tableLen", where));
  // ringcc publishes every parameter it has, so NCCL_PARAM_DUMP_ALL changes nothing.
  thread_local std::vector<const char*> keys;  // valid until this thread's next call
  keys.clear();
  for (const std::string& k : paramKeys()) keys.push_back(k.c_str());
  *table = keys.data();
  *tableLen = static_cast<int>(keys.size());
  return ncclSuccess;
}

// One line per parameter, key = value, as a report: asked for, so printed even with NCCL_DEBUG
// unset (NCCL_DEBUG=VERSION keeps it quiet).
NCCL_API(void, ncclParamDumpAll, void) {
  for (const ParamDef& def : paramTable()) {
    const std::string key = paramKey(def);
    LOG_REPORT("%s = %s", key.c_str(), paramText(def).c_str());
  }
}
