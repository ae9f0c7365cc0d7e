// Our nccl.h against NVIDIA's (when installed), and our libnccl.so.2's exports against
// NVIDIA's libnccl.so.2.
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>

#include "nccl.h"
#include "unit/abi_table.h"

namespace {

const char* kRealLibrary = "/usr/local/cuda/lib64/libnccl.so.2";
const std::string kOurLibrary = std::string(RINGCC_BUILD_ROOT) + "/libnccl.so.2";

bool exists(const char* path) { return access(path, R_OK) == 0; }

std::map<std::string, long long> toMap(const abi::Value* values, int n) {
  std::map<std::string, long long> m;
  for (int i = 0; i < n; ++i) m[values[i].name] = values[i].value;
  return m;
}

// Defined dynamic symbols of a shared library, via nm.
std::set<std::string> exportedSymbols(const std::string& lib) {
  std::set<std::string> out;
  std::string cmd = "nm -D --defined-only '" + lib + "' 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char line[512];
  while (fgets(line, sizeof(line), p)) {
    char addr[64], type[8], name[400];
    if (sscanf(line, "%63s %7s %399s", addr, type, name) == 3) out.insert(name);
  }
  pclose(p);
  return out;
}

}  // namespace

#if RINGCC_HAVE_REAL_NCCL_HEADER
TEST_CASE("enum values and sizes match NVIDIA's nccl.h", "[abi]") {
  auto real = toMap(abi_real::kEnums, abi_real::kNumEnums);
  auto ours = toMap(abi_ours::kEnums, abi_ours::kNumEnums);
  REQUIRE(real.size() == ours.size());
  for (const auto& [name, value] : real) {
    INFO(name);
    CHECK(ours.at(name) == value);
  }
}

TEST_CASE("ncclConfig_t keeps NCCL's field layout and initializer", "[abi]") {
  auto real = toMap(abi_real::kConfigOffsets, abi_real::kNumConfigOffsets);
  auto ours = toMap(abi_ours::kConfigOffsets, abi_ours::kNumConfigOffsets);
  for (const auto& [name, offset] : real) {
    INFO(name);
    CHECK(ours.at(name) == offset);
  }
  // Ours is 2.27's 72 bytes; a newer header only appends fields.
  CHECK(abi_ours::configSize() == 72);
  CHECK(abi_real::configSize() >= abi_ours::configSize());
  unsigned char realBytes[256] = {}, ourBytes[256] = {};
  abi_real::configInitializer(realBytes, sizeof(realBytes));
  abi_ours::configInitializer(ourBytes, sizeof(ourBytes));
  // magic at 8; everything from `blocking` (16) to the end of 2.27's layout is identical.
  CHECK(std::memcmp(realBytes + 8, ourBytes + 8, 4) == 0);
  CHECK(std::memcmp(realBytes + 16, ourBytes + 16, 72 - 16) == 0);
}
#endif

TEST_CASE("our config initializer marks every field unset", "[abi]") {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  CHECK(config.size == sizeof(ncclConfig_t));
  CHECK(config.magic == 0xcafebeef);
  CHECK(config.version == NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH));
  CHECK(config.blocking == INT_MIN);
  CHECK(config.netName == nullptr);
  CHECK(config.nvlsCTAs == INT_MIN);
  CHECK(sizeof(ncclUniqueId) == 128);
}

TEST_CASE("libnccl.so.2 exports NCCL's names with pnccl aliases, ringcc extensions, nothing else",
          "[abi_symbols]") {
  std::set<std::string> ours = exportedSymbols(kOurLibrary);
  REQUIRE_FALSE(ours.empty());
  for (const std::string& s : ours) {
    INFO(s);
    CHECK((s.rfind("nccl", 0) == 0 || s.rfind("pnccl", 0) == 0 || s.rfind("ringcc", 0) == 0));
  }
  for (const std::string& s : ours) {
    if (s.rfind("nccl", 0) != 0 || s == "ncclResetDebugInitInternal") continue;
    INFO(s);
    CHECK(ours.count("p" + s) == 1);
  }
  if (exists(kRealLibrary)) {
    std::set<std::string> real = exportedSymbols(kRealLibrary);
    REQUIRE_FALSE(real.empty());
    for (const std::string& s : real) {
      INFO(s);
      CHECK(ours.count(s) == 1);
    }
  }
}

TEST_CASE("libnccl.so.2 loads without CUDA and answers through dlsym", "[abi_symbols]") {
  void* lib = dlopen(kOurLibrary.c_str(), RTLD_NOW | RTLD_LOCAL);
  REQUIRE(lib != nullptr);
  using GetVersion = ncclResult_t (*)(int*);
  auto getVersion = reinterpret_cast<GetVersion>(dlsym(lib, "pncclGetVersion"));
  REQUIRE(getVersion != nullptr);
  int version = 0;
  CHECK(getVersion(&version) == ncclSuccess);
  CHECK(version == NCCL_VERSION_CODE);
  dlclose(lib);

  // No hard dependency on CUDA, and never on NVIDIA's libnccl.
  std::string cmd = "ldd '" + kOurLibrary + "'";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char line[512];
  std::string deps;
  while (fgets(line, sizeof(line), p)) deps += line;
  pclose(p);
  CHECK(deps.find("libcuda") == std::string::npos);
  CHECK(deps.find("/usr/local/cuda") == std::string::npos);
}
