// Detection on this machine, and the topology in a real communicator: NCCL_TOPO_FILE changes
// the rings it uses, NCCL_TOPO_DUMP_FILE writes what it saw, INFO logs the channels and trees.
#include <dlfcn.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>

#include "nccl.h"
#include "src/base/log.h"
#include "src/core/comm.h"
#include "src/topo/detect.h"
#include "tests/support/test_env.h"
#include "tests/topo/topo_fixtures.h"

using namespace ringcc;
using ringcc::test::fixturePath;
using ringcc::test::loadFixture;
using ringcc::test::ScopedEnv;

namespace {

std::string tempPath(const char* stem) {
  return std::string("/tmp/ringcc-topo-") + stem + "-" + std::to_string(getpid());
}

std::string readAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// NCCL_DEBUG=INFO for the graph subsystem, into a file, for the scope's lifetime.
class InfoLog {
 public:
  InfoLog()
      : path_(tempPath("log")),
        debug_("NCCL_DEBUG", "INFO"),
        subsys_("NCCL_DEBUG_SUBSYS", "GRAPH"),
        file_("NCCL_DEBUG_FILE", path_) {
    resetLogging();
  }
  ~InfoLog() {
    unlink(path_.c_str());
    debug_.~ScopedEnv();
    new (&debug_) ScopedEnv("NCCL_DEBUG", std::nullopt);
  }
  std::string text() const { return readAll(path_); }

 private:
  std::string path_;
  ScopedEnv debug_, subsys_, file_;
};

// Makes n communicators with ncclCommInitAll, returns their channel rings (rank 0's view:
// every rank must agree, which is checked) and destroys them.
std::vector<std::vector<int>> ringsOfNewComms(int n, ncclResult_t* result = nullptr) {
  std::vector<ncclComm_t> comms(size_t(n), nullptr);
  const ncclResult_t r = ncclCommInitAll(comms.data(), n, nullptr);
  if (result) *result = r;
  if (r != ncclSuccess) return {};
  std::vector<std::vector<int>> rings = comms[0]->topo.rings;
  for (ncclComm_t c : comms) {
    CHECK(c->topo.rings == rings);
    // The communicator works on those rings: an all-reduce gives the right sum.
  }
  // 1 MiB per rank: large enough that every channel carries a part.
  constexpr size_t kCount = 1 << 18;
  std::vector<std::vector<float>> bufs(static_cast<size_t>(n), std::vector<float>(kCount));
  for (int i = 0; i < n; ++i) std::iota(bufs[size_t(i)].begin(), bufs[size_t(i)].end(), float(i));
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int i = 0; i < n; ++i)
    REQUIRE(ncclAllReduce(bufs[size_t(i)].data(), bufs[size_t(i)].data(), kCount, ncclFloat,
                          ncclSum, comms[size_t(i)], nullptr) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  // Element j of rank i's input is i + j: the sum is n*j + n(n-1)/2, exact in float here.
  for (int i = 0; i < n; ++i) {
    size_t wrong = 0;
    for (size_t j = 0; j < kCount; j += 97)
      wrong += bufs[size_t(i)][j] != static_cast<float>(double(n) * double(j) + n * (n - 1) / 2);
    CHECK(wrong == 0);
  }
  for (ncclComm_t c : comms) CHECK(ncclCommDestroy(c) == ncclSuccess);
  return rings;
}

}  // namespace

TEST_CASE("detection on this machine gives a host-only graph without error", "[topo_detect]") {
  const XmlNode xml = detectTopologyXml();
  TopoGraph g;
  std::string error;
  REQUIRE(graphFromXml(xml, &g, &error));
  INFO(writeXml(xml));
  CHECK(g.count(TopoType::Cpu) >= 1);
  // Without NVML there are no GPUs (a machine with NVML may have some: then they are found).
  if (void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL); nvml == nullptr)
    CHECK(g.count(TopoType::Gpu) == 0);
  // Every core this process may run on belongs to a CPU of the graph.
  const int numa = currentNumaNode();
  if (numa >= 0) {
    bool found = false;
    for (int c : g.nodesOf(TopoType::Cpu)) found = found || g.nodes[size_t(c)].numa == numa;
    CHECK(found);
  }
  // The dump reloads to the same graph.
  XmlNode again;
  REQUIRE(parseXml(writeXml(xml), &again, &error));
  TopoGraph g2;
  REQUIRE(graphFromXml(again, &g2, &error));
  CHECK(g2 == g);
  CHECK(cpuMaskText({0, 1, 2, 3}) == "0000000f");
  CHECK(cpuMaskText({0, 33}) == "00000002,00000001");
}

TEST_CASE("NCCL_TOPO_FILE changes the rings a communicator uses", "[topo_comm]") {
  ScopedEnv channels("NCCL_MAX_NCHANNELS", "2");
  ScopedEnv noFile("NCCL_TOPO_FILE", std::nullopt);
  const std::vector<std::vector<int>> detected = ringsOfNewComms(4);
  REQUIRE(detected.size() == 2);
  // This machine: one host; ranks of one NUMA node keep rank order.
  if (loadFixture("cpu_2socket").count(TopoType::Cpu) == 2 && currentNumaNode() <= 0)
    CHECK(detected[0] == std::vector<int>{0, 1, 2, 3});

  // Two sockets from the file: ranks take its CPUs in turn (0 and 2 on socket 0), and the
  // ring visits a socket's ranks together.
  InfoLog log;
  ScopedEnv file("NCCL_TOPO_FILE", fixturePath("cpu_2socket"));
  const std::vector<std::vector<int>> fromFile = ringsOfNewComms(4);
  REQUIRE(fromFile.size() == 2);
  CHECK(fromFile[0] == std::vector<int>{0, 2, 1, 3});
  CHECK(fromFile[1] == std::vector<int>{0, 2, 1, 3});
  const std::string text = log.text();
  INFO(text);
  CHECK(text.find("Channel 00/02 : 0 2 1 3") != std::string::npos);
  CHECK(text.find("Channel 01/02 : 0 2 1 3") != std::string::npos);
  CHECK(text.find("NCCL_TOPO_FILE") != std::string::npos);
  CHECK(text.find("Trees [0]") != std::string::npos);

  // 8 PCIe GPUs: ranks on GPUs in order, the ring through one switch then the other.
  ScopedEnv pcie("NCCL_TOPO_FILE", fixturePath("pcie_8gpu"));
  const std::vector<std::vector<int>> gpus = ringsOfNewComms(8);
  REQUIRE(!gpus.empty());
  CHECK(gpus[0] == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
}

TEST_CASE("a bad NCCL_TOPO_FILE fails init with an error naming the file and line", "[topo_comm]") {
  const std::string path = tempPath("bad.xml");
  {
    std::ofstream out(path);
    out << "<system version=\"1\">\n  <cpu numaid=\"0\">\n</system>\n";
  }
  ScopedEnv file("NCCL_TOPO_FILE", path);
  ncclResult_t r = ncclSuccess;
  (void)ringsOfNewComms(2, &r);
  CHECK(r == ncclInvalidArgument);
  const std::string why = ncclGetLastError(nullptr);
  INFO(why);
  CHECK(why.find("NCCL_TOPO_FILE=" + path) != std::string::npos);
  CHECK(why.find("line 3") != std::string::npos);
  ScopedEnv missing("NCCL_TOPO_FILE", path + ".missing");
  (void)ringsOfNewComms(2, &r);
  CHECK(r == ncclInvalidArgument);
  unlink(path.c_str());
}

TEST_CASE("NCCL_TOPO_DUMP_FILE writes the topology the communicator used", "[topo_comm]") {
  const std::string path = tempPath("dump.xml");
  unlink(path.c_str());
  {
    ScopedEnv dump("NCCL_TOPO_DUMP_FILE", path);
    ScopedEnv file("NCCL_TOPO_FILE", fixturePath("dgx_h100"));
    (void)ringsOfNewComms(2);
  }
  XmlNode dumped;
  REQUIRE(readXmlFile(path, "dump", &dumped) == ncclSuccess);
  TopoGraph g;
  std::string error;
  REQUIRE(graphFromXml(dumped, &g, &error));
  CHECK(g == loadFixture("dgx_h100"));
  // Detected: the dump is this host's graph.
  {
    ScopedEnv dump("NCCL_TOPO_DUMP_FILE", path);
    ScopedEnv file("NCCL_TOPO_FILE", std::nullopt);
    (void)ringsOfNewComms(2);
  }
  REQUIRE(readXmlFile(path, "dump", &dumped) == ncclSuccess);
  REQUIRE(graphFromXml(dumped, &g, &error));
  TopoGraph detected;
  REQUIRE(graphFromXml(detectTopologyXml(), &detected, &error));
  CHECK(g == detected);
  unlink(path.c_str());
}

TEST_CASE("an NCCL_TOPO_DUMP_FILE that cannot be written is a WARN, not a failed init",
          "[topo_comm]") {
  ringcc::test::CapturedLog log;
  ScopedEnv dump("NCCL_TOPO_DUMP_FILE", "/nonexistent-dir/topo.xml");
  ncclResult_t r = ncclInternalError;
  (void)ringsOfNewComms(2, &r);
  CHECK(r == ncclSuccess);
  CHECK(log.contains("NCCL_TOPO_DUMP_FILE=/nonexistent-dir/topo.xml: cannot write the file"));
}

TEST_CASE("channels on different rings carry a collective exactly", "[topo_comm]") {
  // Four GPUs joined in a mesh by single NVLinks (faster than their Gen3 PCIe): one ring uses
  // each link one way, the second ring the other way round.
  ScopedEnv file("NCCL_TOPO_FILE", fixturePath("nvlink_4gpu_mesh"));
  ScopedEnv minChannels("NCCL_MIN_NCHANNELS", "2");
  ScopedEnv maxChannels("NCCL_MAX_NCHANNELS", "2");
  const std::vector<std::vector<int>> rings = ringsOfNewComms(4);  // checks the sum, too
  REQUIRE(rings.size() == 2);
  CHECK(rings[0] == std::vector<int>{0, 1, 2, 3});
  CHECK(rings[1] == std::vector<int>{0, 3, 2, 1});
}
