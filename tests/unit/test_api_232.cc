// The calls NCCL 2.29-2.32 added: the parameter API over ringcc's one table, ncclCommMemStats,
// the nccl*Config collectives, ncclSetEncryption, grow's argument checks (tests/coll/test_grow.cc
// grows), and the calls ringcc does not implement yet
// (bad arguments: ncclInvalidArgument naming the argument; good ones: ncclInvalidUsage saying
// "not implemented in ringcc yet"; never a crash or a silent success).
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>

#include "nccl.h"
#include "ringcc.h"
#include "src/base/param.h"
#include "support/test_env.h"

using ringcc::test::CapturedLog;
using ringcc::test::ScopedEnv;

namespace {

ncclComm_t oneRankComm() {
  ncclComm_t comm = nullptr;
  REQUIRE(ncclCommInitAll(&comm, 1, nullptr) == ncclSuccess);
  return comm;
}

}  // namespace

TEST_CASE("every parameter of the table is a key, and keys are listed once", "[api_params]") {
  const char** keys = nullptr;
  int n = 0;
  REQUIRE(ncclParamGetAllParameterKeys(&keys, &n) == ncclSuccess);
  REQUIRE(n == static_cast<int>(ringcc::paramTable().size()));
  std::set<std::string> seen;
  for (int i = 0; i < n; ++i) {
    INFO(keys[i]);
    CHECK(std::string(keys[i]).rfind("NCCL_", 0) == 0);
    CHECK(seen.insert(keys[i]).second);
    ncclParamHandle_t h = nullptr;
    CHECK(ncclParamBind(&h, keys[i]) == ncclSuccess);
    const char* text = nullptr;
    CHECK(ncclParamGetStr(h, &text) == ncclSuccess);
    CHECK(text != nullptr);
  }
  for (const ringcc::ParamDef& def : ringcc::paramTable())
    CHECK(seen.count(std::string("NCCL_") + def.name) == 1);
}

TEST_CASE("keys bind as NCCL_X, RINGCC_X or X to the same parameter", "[api_params]") {
  ncclParamHandle_t a, b, c;
  REQUIRE(ncclParamBind(&a, "NCCL_BUFFSIZE") == ncclSuccess);
  REQUIRE(ncclParamBind(&b, "RINGCC_BUFFSIZE") == ncclSuccess);
  REQUIRE(ncclParamBind(&c, "BUFFSIZE") == ncclSuccess);
  CHECK(a == b);
  CHECK(b == c);
}

TEST_CASE("typed getters read the value ringcc uses and check its type and range", "[api_params]") {
  ScopedEnv r("RINGCC_BUFFSIZE", std::nullopt), n("NCCL_BUFFSIZE", std::nullopt);
  ncclParamHandle_t h;
  REQUIRE(ncclParamBind(&h, "NCCL_BUFFSIZE") == ncclSuccess);
  int64_t i64 = 0;
  CHECK(ncclParamGetI64(h, &i64) == ncclSuccess);
  CHECK(i64 == 1048576);
  uint32_t u32 = 0;
  CHECK(ncclParamGetU32(h, &u32) == ncclSuccess);
  CHECK(u32 == 1048576u);
  int8_t i8 = 0;
  EXPECT_REFUSED(ncclParamGetI8(h, &i8), ncclInvalidArgument,
                 "NCCL_BUFFSIZE is 1048576, which does not fit int8_t");
  uint16_t u16 = 0;
  EXPECT_REFUSED(ncclParamGetU16(h, &u16), ncclInvalidArgument, "does not fit uint16_t");
  {
    ScopedEnv set("RINGCC_BUFFSIZE", "4K");  // RINGCC_ wins, as everywhere
    CHECK(ncclParamGetI32(h, reinterpret_cast<int32_t*>(&u32)) == ncclSuccess);
    CHECK(u32 == 4096u);
    const char* text = nullptr;
    CHECK(ncclParamGetStr(h, &text) == ncclSuccess);
    CHECK(std::string(text) == "4K");
  }
  {
    ScopedEnv negative("NCCL_BUFFSIZE", "-1");
    uint64_t u64 = 7;
    EXPECT_REFUSED(ncclParamGetU64(h, &u64), ncclInvalidArgument, "does not fit uint64_t");
    CHECK(u64 == 7);
    int16_t i16 = 0;
    CHECK(ncclParamGetI16(h, &i16) == ncclSuccess);
    CHECK(i16 == -1);
  }
  uint8_t u8 = 0;
  ncclParamHandle_t sw;
  REQUIRE(ncclParamBind(&sw, "NCCL_SHM_DISABLE") == ncclSuccess);
  CHECK(ncclParamGetU8(sw, &u8) == ncclSuccess);
  CHECK(u8 == 0);
}

TEST_CASE("a text parameter is refused by the integer getters", "[api_params]") {
  ScopedEnv d("NCCL_DEBUG_SUBSYS", std::nullopt), r("RINGCC_DEBUG_SUBSYS", std::nullopt);
  ncclParamHandle_t h;
  REQUIRE(ncclParamBind(&h, "NCCL_DEBUG_SUBSYS") == ncclSuccess);
  int32_t v = 0;
  EXPECT_REFUSED(ncclParamGetI32(h, &v), ncclInvalidArgument,
                 "NCCL_DEBUG_SUBSYS is a text parameter");
  const char* text = nullptr;
  CHECK(ncclParamGetStr(h, &text) == ncclSuccess);
  CHECK(std::string(text) == "INIT,ENV");
  const char* value = nullptr;
  int len = -1;
  CHECK(ncclParamGetParameter("NCCL_DEBUG_SUBSYS", &value, &len) == ncclSuccess);
  CHECK(std::string(value) == "INIT,ENV");
  CHECK(len == 8);
}

TEST_CASE("ncclParamGet copies the raw value and says how much it needs", "[api_params]") {
  ScopedEnv r("RINGCC_SPIN_COUNT", std::nullopt), n("NCCL_SPIN_COUNT", "123");
  ncclParamHandle_t h;
  REQUIRE(ncclParamBind(&h, "NCCL_SPIN_COUNT") == ncclSuccess);
  int64_t v = 0;
  int len = 0;
  CHECK(ncclParamGet(h, &v, sizeof v, &len) == ncclSuccess);
  CHECK(len == 8);
  CHECK(v == 123);
  char small[2];
  EXPECT_REFUSED(ncclParamGet(h, small, sizeof small, &len), ncclInvalidArgument,
                 "maxLen 2 is too small");
  CHECK(len == 8);
  ncclParamHandle_t t;
  REQUIRE(ncclParamBind(&t, "NCCL_DEBUG_SUBSYS") == ncclSuccess);
  char text[32] = {};
  CHECK(ncclParamGet(t, text, sizeof text, &len) == ncclSuccess);
  CHECK(std::string(text) == "INIT,ENV");
  CHECK(len == 9);  // with the NUL
}

TEST_CASE("unknown keys and bad handles are errors naming them", "[api_params]") {
  ncclParamHandle_t h = reinterpret_cast<ncclParamHandle_t>(0x1);
  EXPECT_REFUSED(ncclParamBind(&h, "NCCL_NO_SUCH_KNOB"), ncclInvalidArgument,
                 "key \"NCCL_NO_SUCH_KNOB\" is not a parameter");
  CHECK(h == nullptr);
  const char* value;
  int len;
  EXPECT_REFUSED(ncclParamGetParameter("RINGCC_NOPE", &value, &len), ncclInvalidArgument,
                 "key \"RINGCC_NOPE\"");
  EXPECT_REFUSED(ncclParamBind(nullptr, "NCCL_DEBUG"), ncclInvalidArgument, "out is NULL");
  EXPECT_REFUSED(ncclParamBind(&h, nullptr), ncclInvalidArgument, "key is NULL");
  int64_t v;
  EXPECT_REFUSED(ncclParamGetI64(nullptr, &v), ncclInvalidArgument, "h is NULL");
  int bogus = 0;
  EXPECT_REFUSED(ncclParamGetI64(reinterpret_cast<ncclParamHandle_t>(&bogus), &v),
                 ncclInvalidArgument, "is not a handle from ncclParamBind");
  REQUIRE(ncclParamBind(&h, "NCCL_TIMEOUT") == ncclSuccess);
  EXPECT_REFUSED(ncclParamGetI64(h, nullptr), ncclInvalidArgument, "out is NULL");
  const char** keys;
  EXPECT_REFUSED(ncclParamGetAllParameterKeys(&keys, nullptr), ncclInvalidArgument,
                 "tableLen is NULL");
}

TEST_CASE("ncclParamDumpAll reports every parameter", "[api_params]") {
  ScopedEnv d("NCCL_DEBUG", "WARN");
  CapturedLog log;
  ncclParamDumpAll();
  CHECK(log.contains("NCCL_BUFFSIZE = "));
  CHECK(log.contains("NCCL_TIMEOUT = "));
}

TEST_CASE("ncclCommMemStats: a one-rank host communicator holds no connection memory",
          "[api_232]") {
  // (Communicators with peers count their connections: tests/coll/test_suspend.cc.)
  ncclComm_t comm = oneRankComm();
  for (ncclCommMemStat_t stat : {ncclStatGpuMemSuspend, ncclStatGpuMemSuspended,
                                 ncclStatGpuMemPersist, ncclStatGpuMemTotal}) {
    uint64_t v = 99;
    CHECK(ncclCommMemStats(comm, stat, &v) == ncclSuccess);
    CHECK(v == 0);
  }
  uint64_t v;
  EXPECT_REFUSED(ncclCommMemStats(comm, static_cast<ncclCommMemStat_t>(7), &v), ncclInvalidArgument,
                 "stat 7");
  EXPECT_REFUSED(ncclCommMemStats(comm, ncclStatGpuMemTotal, nullptr), ncclInvalidArgument,
                 "value is NULL");
  EXPECT_REFUSED(ncclCommMemStats(nullptr, ncclStatGpuMemTotal, &v), ncclInvalidArgument,
                 "comm is NULL");
  CHECK(ncclCommDestroy(comm) == ncclSuccess);
}

TEST_CASE("grow, suspend and resume check their arguments as NCCL documents them",
          "[api_232]") {
  ncclComm_t comm = oneRankComm();
  ncclUniqueId plain{};
  REQUIRE(ncclGetUniqueId(&plain) == ncclSuccess);
  ncclComm_t out = reinterpret_cast<ncclComm_t>(0x1);
  EXPECT_REFUSED(ncclCommGetUniqueId(comm, nullptr), ncclInvalidArgument, "uniqueId is NULL");
  EXPECT_REFUSED(ncclCommGetUniqueId(nullptr, &plain), ncclInvalidArgument, "comm is NULL");
  EXPECT_REFUSED(ncclCommGrow(comm, 2, nullptr, -1, nullptr, nullptr), ncclInvalidArgument,
                 "newcomm (output pointer) is NULL");
  // Existing ranks: rank -1, a larger size, an id of ncclCommGetUniqueId (or none).
  EXPECT_REFUSED(ncclCommGrow(comm, 2, nullptr, 0, &out, nullptr), ncclInvalidArgument,
                 "rank is 0; ranks of the existing communicator pass -1");
  CHECK(out == nullptr);
  EXPECT_REFUSED(ncclCommGrow(comm, 1, nullptr, -1, &out, nullptr), ncclInvalidArgument,
                 "nRanks 1 must exceed the communicator's 1");
  EXPECT_REFUSED(ncclCommGrow(comm, 2, &plain, -1, &out, nullptr), ncclInvalidArgument,
                 "uniqueId was not made by ncclCommGetUniqueId");
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0;
  EXPECT_REFUSED(ncclCommGrow(comm, 2, nullptr, -1, &out, &bad), ncclInvalidArgument,
                 "magic is 0x0");
  // New ranks: an id, a rank past the old ones.
  ncclUniqueId id{};
  REQUIRE(ncclCommGetUniqueId(comm, &id) == ncclSuccess);
  EXPECT_REFUSED(ncclCommGrow(nullptr, 2, nullptr, 1, &out, nullptr), ncclInvalidArgument,
                 "comm and uniqueId are both NULL");
  EXPECT_REFUSED(ncclCommGrow(nullptr, 2, &id, -1, &out, nullptr), ncclInvalidArgument,
                 "comm is NULL and rank is -1");
  EXPECT_REFUSED(ncclCommGrow(nullptr, 2, &id, 2, &out, nullptr), ncclInvalidArgument,
                 "rank 2 is out of range [1, 2)");
  EXPECT_REFUSED(ncclCommGrow(nullptr, 2, &id, 0, &out, nullptr), ncclInvalidArgument,
                 "rank 0 is out of range [1, 2)");
  EXPECT_REFUSED(ncclCommGrow(nullptr, 1, &id, 0, &out, nullptr), ncclInvalidArgument,
                 "nRanks 1 must exceed the size 1");
  EXPECT_REFUSED(ncclCommGrow(nullptr, 2, &plain, 1, &out, nullptr), ncclInvalidArgument,
                 "uniqueId was not made by ncclCommGetUniqueId");
  EXPECT_REFUSED(ncclCommGrow(nullptr, 2, &id, 1, &out, &bad), ncclInvalidArgument, "magic is 0x0");
  CHECK(out == nullptr);
  EXPECT_REFUSED(ncclCommSuspend(comm, 0x6), ncclInvalidArgument, "flags 0x6");
  EXPECT_REFUSED(ncclCommSuspend(nullptr, NCCL_SUSPEND_MEM), ncclInvalidArgument, "comm is NULL");
  EXPECT_REFUSED(ncclCommResume(comm), ncclInvalidUsage,
                 "communicator is not suspended (no ncclCommSuspend)");
  EXPECT_REFUSED(ncclCommResume(nullptr), ncclInvalidArgument, "comm is NULL");
  // Refusals leave the communicator usable.
  float x = 1;
  CHECK(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comm, nullptr) == ncclSuccess);
  CHECK(ncclCommDestroy(comm) == ncclSuccess);
}

TEST_CASE("one-sided calls and window pointers check their arguments", "[api_232]") {
  ncclComm_t comm = oneRankComm();
  float buf[4] = {};
  ncclWindow_t fake = reinterpret_cast<ncclWindow_t>(buf);  // not a window of anyone's
  EXPECT_REFUSED(ncclPutSignal(buf, 4, ncclFloat, 1, fake, 0, 0, 0, 0, comm, nullptr),
                 ncclInvalidArgument, "peer 1 is out of range");
  EXPECT_REFUSED(ncclPutSignal(nullptr, 4, ncclFloat, 0, fake, 0, 0, 0, 0, comm, nullptr),
                 ncclInvalidArgument, "localbuff is NULL");
  EXPECT_REFUSED(ncclPutSignal(buf, 4, ncclFloat, 0, nullptr, 0, 0, 0, 0, comm, nullptr),
                 ncclInvalidArgument, "peerWin is NULL");
  EXPECT_REFUSED(
      ncclPutSignal(buf, 4, static_cast<ncclDataType_t>(40), 0, fake, 0, 0, 0, 0, comm, nullptr),
      ncclInvalidArgument, "datatype 40");
  EXPECT_REFUSED(ncclPutSignal(buf, 4, ncclFloat, 0, fake, 0, -1, 0, 0, comm, nullptr),
                 ncclInvalidArgument, "sigIdx -1");
  EXPECT_REFUSED(ncclPutSignal(buf, 4, ncclFloat, 0, fake, 0, 0, 0, 3, comm, nullptr),
                 ncclInvalidArgument, "flags 0x3");
  // Signals are set up by the first window registration (collective).
  EXPECT_REFUSED(ncclPutSignal(buf, 4, ncclFloat, 0, fake, 0, 0, 0, 0, comm, nullptr),
                 ncclInvalidUsage, "no window was registered on this communicator");
  EXPECT_REFUSED(ncclSignal(0, 0, -2, 0, comm, nullptr), ncclInvalidArgument, "ctx -2");
  EXPECT_REFUSED(ncclSignal(0, 0, 0, 0, nullptr, nullptr), ncclInvalidArgument, "comm is NULL");
  EXPECT_REFUSED(ncclSignal(0, 0, 0, 0, comm, nullptr), ncclInvalidUsage,
                 "no window was registered on this communicator");
  ncclWaitSignalDesc_t desc = {1, 0, 0, 0};
  EXPECT_REFUSED(ncclWaitSignal(-1, &desc, comm, nullptr), ncclInvalidArgument, "nDesc -1");
  EXPECT_REFUSED(ncclWaitSignal(0, &desc, comm, nullptr), ncclInvalidArgument, "nDesc 0");
  EXPECT_REFUSED(ncclWaitSignal(1, nullptr, comm, nullptr), ncclInvalidArgument,
                 "signalDescs is NULL");
  ncclWaitSignalDesc_t badPeer = {1, 5, 0, 0};
  EXPECT_REFUSED(ncclWaitSignal(1, &badPeer, comm, nullptr), ncclInvalidArgument,
                 "signalDescs[].peer 5");
  ncclWaitSignalDesc_t noCount = {0, 0, 0, 0};
  EXPECT_REFUSED(ncclWaitSignal(1, &noCount, comm, nullptr), ncclInvalidArgument,
                 "signalDescs[0].opCnt 0 must be > 0");
  EXPECT_REFUSED(ncclWaitSignal(1, &desc, comm, nullptr), ncclInvalidUsage,
                 "no window was registered on this communicator");
  void* ptr = buf;
  EXPECT_REFUSED(ncclWinGetUserPtr(comm, nullptr, &ptr), ncclInvalidArgument, "win is NULL");
  CHECK(ptr == nullptr);
  EXPECT_REFUSED(ncclWinGetUserPtr(comm, fake, nullptr), ncclInvalidArgument,
                 "outUserPtr is NULL");
  EXPECT_REFUSED(ncclWinGetUserPtr(comm, fake, &ptr), ncclInvalidArgument,
                 "is not a registered window of this communicator");

  // Registration's own arguments.
  ncclWindow_t win = fake;
  EXPECT_REFUSED(ncclCommWindowRegister(comm, buf, sizeof(buf), nullptr, 0), ncclInvalidArgument,
                 "win is NULL");
  EXPECT_REFUSED(ncclCommWindowRegister(comm, nullptr, sizeof(buf), &win, 0),
                 ncclInvalidArgument, "buff is NULL");
  CHECK(win == nullptr);
  EXPECT_REFUSED(ncclCommWindowRegister(comm, buf, 0, &win, 0), ncclInvalidArgument, "size is 0");
  EXPECT_REFUSED(ncclCommWindowRegister(comm, buf, sizeof(buf), &win, 0x30), ncclInvalidArgument,
                 "winFlags 0x30 has unknown bits 0x30");
  EXPECT_REFUSED(ncclCommWindowRegister(nullptr, buf, sizeof(buf), &win, 0), ncclInvalidArgument,
                 "comm is NULL");
  REQUIRE(ncclCommWindowRegister(comm, buf, sizeof(buf), &win, NCCL_WIN_COLL_SYMMETRIC) ==
          ncclSuccess);
  REQUIRE(win != nullptr);
  CHECK(ncclWinGetUserPtr(comm, win, &ptr) == ncclSuccess);
  CHECK(ptr == buf);
  // With a window: what needs it is checked against it.
  float src[4] = {1, 2, 3, 4};
  EXPECT_REFUSED(ncclPutSignal(src, 4, ncclFloat, 0, fake, 0, 0, 0, 0, comm, nullptr),
                 ncclInvalidArgument, "peerWin");
  EXPECT_REFUSED(ncclPutSignal(src, 4, ncclFloat, 0, win, 4, 0, 0, 0, comm, nullptr),
                 ncclInvalidArgument, "peerWinOffset 4 + 16 bytes is beyond peer 0's window of 16");
  EXPECT_REFUSED(ncclPutSignal(src, 1, ncclFloat, 0, win, ~size_t{0}, 0, 0, 0, comm, nullptr),
                 ncclInvalidArgument, "is beyond peer 0's window");
  EXPECT_REFUSED(ncclPutSignal(src, 4, ncclFloat, 0, win, 0, 8, 0, 0, comm, nullptr),
                 ncclInvalidArgument, "sigIdx 8 is out of range [0, 8)");
  EXPECT_REFUSED(ncclPutSignal(src, 4, ncclFloat, 0, win, 0, 0, 1, 0, comm, nullptr),
                 ncclInvalidArgument, "ctx 1 is out of range [0, 1)");
  ncclWaitSignalDesc_t badCtx = {1, 0, 0, 1};
  EXPECT_REFUSED(ncclWaitSignal(1, &badCtx, comm, nullptr), ncclInvalidArgument,
                 "signalDescs[].ctx 1 is out of range");
  // A put to this rank itself, and its signal.
  CHECK(ncclPutSignal(src, 4, ncclFloat, 0, win, 0, 0, 0, 0, comm, nullptr) == ncclSuccess);
  CHECK(ncclWaitSignal(1, &desc, comm, nullptr) == ncclSuccess);
  CHECK(buf[3] == 4.0f);
  // Deregistration: NULL is nothing to do; a window once only.
  CHECK(ncclCommWindowDeregister(comm, nullptr) == ncclSuccess);
  CHECK(ncclCommWindowDeregister(comm, win) == ncclSuccess);
  EXPECT_REFUSED(ncclCommWindowDeregister(comm, win), ncclInvalidArgument,
                 "is not a registered window of this communicator");
  EXPECT_REFUSED(ncclPutSignal(src, 4, ncclFloat, 0, win, 0, 0, 0, 0, comm, nullptr),
                 ncclInvalidArgument, "peerWin");
  // Refusals leave the communicator usable.
  float x = 1;
  CHECK(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comm, nullptr) == ncclSuccess);
  CHECK(ncclCommDestroy(comm) == ncclSuccess);
}

TEST_CASE("nccl*Config collectives run as the plain ones and check their config", "[api_232]") {
  ncclComm_t comm = oneRankComm();
  float in[4] = {1, 2, 3, 4}, out[4] = {};
  CHECK(ncclAllReduceConfig(in, out, 4, ncclFloat, ncclSum, comm, nullptr, nullptr) == ncclSuccess);
  CHECK(out[3] == 4);
  ncclCollConfig_t config = NCCL_COLLCONFIG_INITIALIZER;
  config.maxCTAs = 2;  // a hint: checked, not binding
  std::memset(out, 0, sizeof out);
  CHECK(ncclAllGatherConfig(in, out, 4, ncclFloat, comm, nullptr, &config) == ncclSuccess);
  CHECK(out[2] == 3);
  CHECK(ncclBroadcastConfig(in, out, 4, ncclFloat, 0, comm, nullptr, &config) == ncclSuccess);
  CHECK(ncclReduceConfig(in, out, 4, ncclFloat, ncclMax, 0, comm, nullptr, &config) == ncclSuccess);
  CHECK(ncclReduceScatterConfig(in, out, 4, ncclFloat, ncclSum, comm, nullptr, &config) ==
        ncclSuccess);
  CHECK(ncclAlltoAllConfig(in, out, 4, ncclFloat, comm, nullptr, &config) == ncclSuccess);
  CHECK(ncclGatherConfig(in, out, 4, ncclFloat, 0, comm, nullptr, &config) == ncclSuccess);
  CHECK(ncclScatterConfig(in, out, 4, ncclFloat, 0, comm, nullptr, &config) == ncclSuccess);
  // The plain call's checks still apply.
  EXPECT_REFUSED(ncclAllReduceConfig(in, out, 4, ncclFloat, ncclSum, nullptr, nullptr, &config),
                 ncclInvalidArgument, "comm is NULL");
  ncclCollConfig_t bad = NCCL_COLLCONFIG_INITIALIZER;
  bad.magic = 1;
  EXPECT_REFUSED(ncclAllReduceConfig(in, out, 4, ncclFloat, ncclSum, comm, nullptr, &bad),
                 ncclInvalidArgument, "NCCL_COLLCONFIG_INITIALIZER");
  bad = NCCL_COLLCONFIG_INITIALIZER;
  bad.minCTAs = 4;
  bad.maxCTAs = 2;
  EXPECT_REFUSED(ncclAllReduceConfig(in, out, 4, ncclFloat, ncclSum, comm, nullptr, &bad),
                 ncclInvalidArgument, "minCTAs 4 / maxCTAs 2");
  bad = NCCL_COLLCONFIG_INITIALIZER;
  bad.algSelection = "NVLS";
  EXPECT_REFUSED(ncclAllReduceConfig(in, out, 4, ncclFloat, ncclSum, comm, nullptr, &bad),
                 ncclInvalidUsage, "algSelection \"NVLS\" is not implemented in ringcc yet");
  bad.forceAlgSelection = 0;  // not binding: the tuner chooses
  CHECK(ncclAllReduceConfig(in, out, 4, ncclFloat, ncclSum, comm, nullptr, &bad) == ncclSuccess);
  bad = NCCL_COLLCONFIG_INITIALIZER;
  bad.launchCompletionEvent = reinterpret_cast<cudaEvent_t>(0x10);
  EXPECT_REFUSED(ncclAllReduceConfig(in, out, 4, ncclFloat, ncclSum, comm, nullptr, &bad),
                 ncclInvalidUsage, "launchCompletionEvent is not implemented");
  CHECK(ncclCommDestroy(comm) == ncclSuccess);
}

TEST_CASE("ncclSetEncryption accepts plaintext, refuses PSK as not implemented", "[api_232]") {
  ncclEncryptionConfig_t config = NCCL_ENCRYPTION_CONFIG_INITIALIZER;
  CHECK(ncclSetEncryption(&config) == ncclSuccess);
  EXPECT_REFUSED(ncclSetEncryption(nullptr), ncclInvalidArgument, "config is NULL");
  config.mode = NCCL_ENCRYPTION_MODE_PSK;
  config.psk = "secret";
  EXPECT_REFUSED(ncclSetEncryption(&config), ncclInvalidUsage,
                 "NCCL_ENCRYPTION_MODE_PSK is not implemented in ringcc yet");
  config.mode = 9;
  EXPECT_REFUSED(ncclSetEncryption(&config), ncclInvalidArgument, "mode 9");
}

TEST_CASE("ncclGetVersion gives the NCCL API level; ringccGetVersion tells ringcc apart",
          "[api_232]") {
  int v = 0;
  CHECK(ncclGetVersion(&v) == ncclSuccess);
  CHECK(v == NCCL_VERSION(2, 32, 3));
  CHECK(ringccGetVersion(&v) == ncclSuccess);
  CHECK(v == RINGCC_VERSION_CODE);
  EXPECT_REFUSED(ringccGetVersion(nullptr), ncclInvalidArgument, "version is NULL");
  CHECK(std::string(ncclGetErrorString(ncclTimeout)) == "operation timed out");
}
