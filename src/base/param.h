// Parameters: the one table of every environment knob ringcc reads.
//
// Each parameter has a name (DEBUG), a default and a description. It is read from
// RINGCC_<name> if set, else NCCL_<name>, else the default, every time it is asked for (reads
// happen at init, never on a hot path, and tests may change the environment between calls).
// docs/env.md lists the same table; tests/unit/test_params.cc checks that they agree.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace ringcc {

// What a parameter's value is: an integer (sizes, counts, switches, milliseconds; parsed by
// parseSize) or text (names, lists, paths). The parameter API (ncclParamGet*) checks it.
enum class ParamKind { Text, Int };

struct ParamDef {
  const char* name;          // without prefix: "BUFFSIZE"
  const char* defaultValue;  // as text; "" means unset
  const char* description;
  ParamKind kind = ParamKind::Text;
};

// Every parameter ringcc knows.
std::span<const ParamDef> paramTable();

// The definition of `name`, or nullptr if it is not in the table.
const ParamDef* findParam(const char* name);

// Raw value: RINGCC_<name>, else NCCL_<name>, else nullopt (no default applied).
std::optional<std::string> paramEnv(const char* name);

// Value with the table's default applied. `name` must be in the table.
std::string paramString(const char* name);

// Integer value (decimal, 0x hex, or with a K/M/G suffix). A malformed value is logged at
// WARN and the default is used instead.
int64_t paramInt(const char* name);

// Parses "123", "0x10", "4K", "2M", "1G" into *out; false if malformed.
bool parseSize(const std::string& text, int64_t* out);

}  // namespace ringcc
