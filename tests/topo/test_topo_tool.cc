// ringcc-topo, run as a user runs it.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "src/topo/graph.h"
#include "src/topo/xml.h"
#include "tests/topo/topo_fixtures.h"

using namespace ringcc;
using ringcc::test::fixturePath;
using ringcc::test::kFixtures;

namespace {

struct Run {
  int status = -1;
  std::string out;
};

// Runs ringcc-topo with `args`, after `env` (VAR=value words, or nothing).
Run runTool(const std::string& args, const std::string& env = "") {
  const std::string cmd =
      env + " " + std::string(RINGCC_BUILD_ROOT) + "/bench/ringcc-topo " + args + " 2>&1";
  Run r;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

}  // namespace

TEST_CASE("ringcc-topo prints the graph, rings and trees of each fixture", "[topo_tool]") {
  for (const char* name : kFixtures) {
    for (int hosts : {1, 4}) {
      const Run r = runTool(fixturePath(name) + " --hosts " + std::to_string(hosts));
      INFO(name << " --hosts " << hosts << "\n" << r.out);
      CHECK(r.status == 0);
      CHECK(r.out.find("Topology " + fixturePath(name)) != std::string::npos);
      CHECK(r.out.find("Channel 00/") != std::string::npos);
      CHECK(r.out.find("Trees (rank") != std::string::npos);
      CHECK(r.out.find(std::to_string(hosts) + (hosts == 1 ? " host:" : " hosts:")) !=
            std::string::npos);
    }
  }
  const Run dgx = runTool(fixturePath("dgx_h100") + " --hosts 512 --channels 8");
  CHECK(dgx.status == 0);
  CHECK(dgx.out.find("4096 ranks on 512 hosts") != std::string::npos);
}

TEST_CASE("ringcc-topo detects this host and dumps XML that loads back", "[topo_tool]") {
  const std::string path = "/tmp/ringcc-topo-tool-" + std::to_string(getpid()) + ".xml";
  const Run r = runTool("--ranks 2 --dump " + path);
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(r.out.find("Topology detected on this host") != std::string::npos);
  CHECK(r.out.find("2 ranks on 1 host") != std::string::npos);
  const Run again = runTool(path + " --ranks 2");
  CHECK(again.status == 0);
  // The same graph, read from the dump: the graph part of both outputs (after the first
  // ": ", up to the blank line before the rings) is the same text.
  auto graphPart = [](const std::string& out) {
    const size_t from = out.find(": ");
    return out.substr(from, std::min(out.find("\n\n"), out.find("\nXML written")) - from);
  };
  INFO(again.out);
  CHECK(graphPart(again.out) == graphPart(r.out));
  CHECK(graphPart(r.out).find("CPUs") != std::string::npos);
  unlink(path.c_str());
}

TEST_CASE("ringcc-topo refuses bad files and bad usage", "[topo_tool]") {
  const Run missing = runTool("/nonexistent.xml");
  CHECK(missing.status == 1);
  CHECK(missing.out.find("/nonexistent.xml") != std::string::npos);
  const Run bad = runTool(fixturePath("dgx_h100") + " --ranks 7 --hosts 2");
  CHECK(bad.status == 1);
  CHECK(bad.out.find("cannot place 7 ranks on 2 hosts") != std::string::npos);
  CHECK(runTool("--hosts 0").status == 2);
  CHECK(runTool("--bogus").status == 2);
}

TEST_CASE("GPUs, NVLinks and NVSwitches are detected through NVML (a stand-in library)",
          "[topo_tool]") {
  const std::string path = "/tmp/ringcc-topo-nvml-" + std::to_string(getpid()) + ".xml";
  // Two sm90 GPUs with 18 NVLinks each to four NVSwitch ports (tests/topo/fake_nvml.c); bus
  // ids no PCI tree here has, so they hang off the first CPU.
  const Run r = runTool("--dump " + path, std::string("LD_LIBRARY_PATH=") + RINGCC_FAKE_NVML_DIR +
                                              " FAKE_NVML_BUSIDS=0000:19:00.0,0000:3b:00.0");
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("2 GPUs") != std::string::npos);
  CHECK(r.out.find("1 NVSwitch") != std::string::npos);
  CHECK(r.out.find("2 ranks on 1 host") != std::string::npos);
  CHECK(r.out.find("type NVL") != std::string::npos);
  XmlNode xml;
  REQUIRE(readXmlFile(path, "dump", &xml) == ncclSuccess);
  unlink(path.c_str());
  TopoGraph g;
  std::string error;
  REQUIRE(graphFromXml(xml, &g, &error));
  const std::vector<int> gpus = rankDevices(g);
  REQUIRE(gpus.size() == 2);
  CHECK(g.nodes[size_t(gpus[0])].id == "0000:19:00.0");  // NVML's 8-digit upper case, normalized
  CHECK(g.nodes[size_t(gpus[1])].id == "0000:3b:00.0");
  CHECK(g.nodes[size_t(gpus[0])].sm == 90);
  CHECK(g.nodes[size_t(gpus[1])].dev == 1);
  double nvl = 0;
  for (const TopoLink& l : g.links)
    if (l.from == gpus[0] && l.type == LinkType::Nvl) nvl += l.bw;
  CHECK(nvl == Approx(18 * 20.6));
  // The NVLink counts per NVSwitch port, as NCCL writes them.
  const std::string text = writeXml(xml);
  CHECK(text.find("<nvlink target=\"0000:05:00.0\" count=\"5\" tclass=\"0x068000\"/>") !=
        std::string::npos);
  CHECK(text.find("<nvlink target=\"0000:06:00.0\" count=\"4\" tclass=\"0x068000\"/>") !=
        std::string::npos);
}
