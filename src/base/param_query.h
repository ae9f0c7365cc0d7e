// The parameter table as NCCL's parameter API sees it (ncclParamBind, ncclParamGet*,
// ncclParamGetParameter, ncclParamGetAllParameterKeys): keys, typed reads that check the
// parameter's kind and range, and the value as text. src/api/param_api.cc holds the entry
// points; this is their logic, over the one table of param.h.
//
// Keys: every parameter is listed as NCCL_<name> (every ringcc parameter is read from
// NCCL_<name> too); binding also accepts RINGCC_<name> and the bare <name>. The value is what
// ringcc would use now: RINGCC_<name>, else NCCL_<name>, else the default.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nccl.h"
#include "src/base/param.h"

namespace ringcc {

// The parameter `key` names, or ncclInvalidArgument with a WARN naming the key. `where` names
// the API call.
ncclResult_t bindParam(const char* key, const char* where, const ParamDef** out);

// The listed key of `def`: "NCCL_<name>".
std::string paramKey(const ParamDef& def);

// Every listed key, in table order.
const std::vector<std::string>& paramKeys();

// The value of an integer parameter, checked to fit [lo, hi]: ncclInvalidArgument naming the
// key if `def` is a text parameter, or if the value does not fit (`type` names the C type).
ncclResult_t readIntParam(const ParamDef& def, int64_t lo, uint64_t hi, const char* type,
                          const char* where, int64_t* out);

// The value as text ("" for an unset text parameter without a default).
std::string paramText(const ParamDef& def);

}  // namespace ringcc
