#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "src/base/param.h"
#include "support/test_env.h"

using namespace ringcc;
using ringcc::test::ScopedEnv;

TEST_CASE("RINGCC_X wins over NCCL_X, which wins over the default", "[params]") {
  ScopedEnv a("RINGCC_BUFFSIZE", std::nullopt), b("NCCL_BUFFSIZE", std::nullopt);
  CHECK(paramInt("BUFFSIZE") == 1048576);
  {
    ScopedEnv n("NCCL_BUFFSIZE", "1M");
    CHECK(paramInt("BUFFSIZE") == (1 << 20));
    ScopedEnv r("RINGCC_BUFFSIZE", "65536");
    CHECK(paramInt("BUFFSIZE") == 65536);
  }
  CHECK(paramInt("BUFFSIZE") == 1048576);
}

TEST_CASE("sizes parse with K/M/G suffixes and reject garbage", "[params]") {
  int64_t v = 0;
  CHECK(parseSize("4K", &v));
  CHECK(v == 4096);
  CHECK(parseSize("0x10", &v));
  CHECK(v == 16);
  CHECK(parseSize("2g", &v));
  CHECK(v == (int64_t{2} << 30));
  CHECK_FALSE(parseSize("", &v));
  CHECK_FALSE(parseSize("12Q", &v));
  // Sizes whose scaled value overflows 64 bits are malformed (found by the env fuzzer).
  CHECK_FALSE(parseSize("433333333333333M", &v));
  CHECK_FALSE(parseSize("9223372036854775807K", &v));
  CHECK(parseSize("8589934591G", &v));
  CHECK_FALSE(parseSize("abc", &v));
  CHECK_FALSE(parseSize("4KB", &v));
}

TEST_CASE("a malformed number falls back to the default", "[params]") {
  ScopedEnv r("RINGCC_BUFFSIZE", std::nullopt);
  ScopedEnv n("NCCL_BUFFSIZE", "lots");
  CHECK(paramInt("BUFFSIZE") == 1048576);
}

TEST_CASE("the parameter table has unique names, each documented in docs/env.md", "[params]") {
  std::ifstream in(std::string(RINGCC_SOURCE_ROOT) + "/docs/env.md");
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  std::set<std::string> seen;
  for (const ParamDef& p : paramTable()) {
    INFO(p.name);
    CHECK(seen.insert(p.name).second);
    CHECK(std::strlen(p.description) > 0);
    CHECK(doc.find(std::string("`NCCL_") + p.name + "`") != std::string::npos);
  }
  CHECK(findParam("NO_SUCH_PARAM") == nullptr);
}

TEST_CASE("integer parameters have numeric defaults, text ones are not numbers", "[params]") {
  // The parameter API's typed getters trust ParamDef::kind; a default that contradicts it
  // would make ncclParamGetI64 answer a value ringcc never uses.
  for (const ParamDef& def : paramTable()) {
    INFO(def.name);
    int64_t v;
    if (def.kind == ParamKind::Int)
      CHECK(parseSize(def.defaultValue, &v));
    else
      CHECK_FALSE(parseSize(def.defaultValue, &v));
  }
}
