// NCCL's topology XML: reading, writing, the graph made from it, and errors on bad input.
#include <catch2/catch.hpp>

#include "src/topo/graph.h"
#include "src/topo/xml.h"
#include "tests/topo/topo_fixtures.h"

using namespace ringcc;
using ringcc::test::kFixtures;
using ringcc::test::loadFixture;

namespace {

std::string parseError(const std::string& text) {
  XmlNode root;
  std::string error;
  if (parseXml(text, &root, &error)) return "";
  return error;
}

std::string graphError(const std::string& text) {
  XmlNode root;
  std::string error;
  REQUIRE(parseXml(text, &root, &error));
  TopoGraph g;
  if (graphFromXml(root, &g, &error)) return "";
  return error;
}

const TopoLink* findLink(const TopoGraph& g, TopoType from, TopoType to) {
  for (const TopoLink& l : g.links)
    if (g.nodes[size_t(l.from)].type == from && g.nodes[size_t(l.to)].type == to) return &l;
  return nullptr;
}

}  // namespace

TEST_CASE("the XML reader takes NCCL's layout and the writer gives it back", "[topo_xml]") {
  const std::string text =
      "<?xml version=\"1.0\"?>\n"
      "<!-- dumped by NCCL -->\n"
      "<system version=\"1\">\n"
      "  <cpu numaid=\"0\" affinity='0000ffff' arch=\"x86_64\">\n"
      "    <pci busid=\"0000:19:00.0\" class=\"0x030200\" link_speed=\"32.0 GT/s PCIe\" "
      "link_width=\"16\">\n"
      "      <gpu dev=\"0\" sm=\"90\" rank=\"0\" gdr=\"1\">\n"
      "        <nvlink target=\"0000:05:00.0\" count=\"18\" tclass=\"0x068000\"/>\n"
      "      </gpu>\n"
      "    </pci>\n"
      "  </cpu>\n"
      "</system>\n";
  XmlNode root;
  std::string error;
  REQUIRE(parseXml(text, &root, &error));
  CHECK(root.name == "system");
  REQUIRE(root.subs.size() == 1);
  const XmlNode& cpu = root.subs[0];
  CHECK(cpu.line == 4);
  CHECK(cpu.attrOr("affinity", "") == "0000ffff");
  REQUIRE(cpu.subs.size() == 1);
  const XmlNode& gpu = cpu.subs[0].subs[0];
  CHECK(gpu.name == "gpu");
  CHECK(gpu.attrOr("sm", "") == "90");
  CHECK(gpu.subs[0].attrOr("count", "") == "18");
  // The writer prints what NCCL prints: double quotes, two spaces per level, <x/> for leaves.
  const std::string written = writeXml(root);
  CHECK(written.starts_with("<system version=\"1\">\n  <cpu numaid=\"0\" affinity=\"0000ffff\""));
  CHECK(written.find(
            "        <nvlink target=\"0000:05:00.0\" count=\"18\" tclass=\"0x068000\"/>\n") !=
        std::string::npos);
  XmlNode again;
  REQUIRE(parseXml(written, &again, &error));
  CHECK(writeXml(again) == written);
}

TEST_CASE("entities are decoded and written back escaped", "[topo_xml]") {
  XmlNode root;
  std::string error;
  REQUIRE(parseXml("<system version=\"1\" name=\"a &amp; b &quot;c&quot;\"/>", &root, &error));
  CHECK(root.attrOr("name", "") == "a & b \"c\"");
  CHECK(writeXml(root) == "<system version=\"1\" name=\"a &amp; b &quot;c&quot;\"/>\n");
}

TEST_CASE("bad XML is an error that names the line", "[topo_xml]") {
  CHECK(parseError("") == "line 1: no element: the file is empty");
  CHECK(parseError("<system version=\"1\">\n  <cpu>\n</system>\n") ==
        "line 3: </system> closes <cpu> (line 2)");
  CHECK(parseError("<system version=\"1\">\n<cpu numaid=0/>\n</system>") ==
        "line 2: attribute value must be quoted");
  CHECK(parseError("<system>\n\n<cpu>") == "line 3: <cpu> (line 3) never closed");
  CHECK(parseError("<system a=\"1\" a=\"2\"/>") == "line 1: attribute a given twice in <system>");
  CHECK(parseError("<system/>\n<system/>") == "line 2: text after the end of <system>");
  CHECK(parseError("<system>hello</system>") ==
        "line 1: text inside <system> (only elements are allowed)");
  CHECK(parseError("<!-- never closed") == "line 1: comment never closed (no -->)");
  CHECK(parseError("<system v=\"&bogus;\"/>").find("unknown entity") != std::string::npos);
  // Nesting past the limit is refused, not a stack overflow.
  std::string deep;
  for (int i = 0; i < 10000; ++i) deep += "<a>";
  CHECK(parseError(deep).find("nested deeper than") != std::string::npos);
}

TEST_CASE("a graph needs <system version=\"1\"> and numbers where numbers go", "[topo_graph]") {
  CHECK(graphError("<system/>") == "line 1: <system> has no version (NCCL writes version=\"1\")");
  CHECK(graphError("<system version=\"2\"/>").find("only version 1") != std::string::npos);
  CHECK(graphError("<topology version=\"1\"/>").find("not <system>") != std::string::npos);
  CHECK(graphError("<system version=\"1\">\n<cpu numaid=\"zero\"/>\n</system>") ==
        "line 2: <cpu numaid=\"zero\">: not a number");
  CHECK(graphError("<system version=\"1\">\n<cpu numaid=\"0\"><nic><net name=\"x\" speed=\"fast\"/>"
                   "</nic></cpu>\n</system>")
            .find("not a number") != std::string::npos);
  // Unknown elements and attributes are ignored, as NCCL ignores them.
  CHECK(graphError(
            "<system version=\"1\"><cpu numaid=\"0\" color=\"blue\"><fan/></cpu></system>") == "");
}

TEST_CASE("the fixtures make the graphs they describe", "[topo_graph]") {
  const TopoGraph dgx = loadFixture("dgx_h100");
  CHECK(dgx.count(TopoType::Gpu) == 8);
  CHECK(dgx.count(TopoType::Nic) == 8);
  CHECK(dgx.count(TopoType::Cpu) == 2);
  CHECK(dgx.count(TopoType::NvSwitch) == 1);
  CHECK(dgx.count(TopoType::Pci) == 4);
  const TopoLink* nvl = findLink(dgx, TopoType::Gpu, TopoType::NvSwitch);
  REQUIRE(nvl);
  CHECK(nvl->type == LinkType::Nvl);
  CHECK(nvl->bw == Approx(18 * 20.6));  // 18 NVLinks of an H100
  const TopoLink* pci = findLink(dgx, TopoType::Pci, TopoType::Gpu);
  REQUIRE(pci);
  CHECK(pci->bw == Approx(48.0));                                                 // PCIe Gen5 x16
  CHECK(dgx.nodes[size_t(dgx.nodesOf(TopoType::Nic)[0])].netBw == Approx(50.0));  // 400 Gb/s
  const TopoLink* sys = findLink(dgx, TopoType::Cpu, TopoType::Cpu);
  REQUIRE(sys);
  CHECK(sys->bw == Approx(10.0));  // Intel, Skylake or later

  const TopoGraph pcie = loadFixture("pcie_8gpu");
  CHECK(pcie.count(TopoType::Gpu) == 8);
  CHECK(pcie.count(TopoType::NvSwitch) == 0);
  CHECK(findLink(pcie, TopoType::Gpu, TopoType::Gpu) == nullptr);
  REQUIRE(findLink(pcie, TopoType::Pci, TopoType::Gpu));
  CHECK(findLink(pcie, TopoType::Pci, TopoType::Gpu)->bw == Approx(24.0));  // Gen4 x16

  const TopoGraph cpu = loadFixture("cpu_2socket");
  CHECK(cpu.count(TopoType::Gpu) == 0);
  CHECK(cpu.count(TopoType::Cpu) == 2);
  REQUIRE(findLink(cpu, TopoType::Cpu, TopoType::Cpu));
  CHECK(findLink(cpu, TopoType::Cpu, TopoType::Cpu)->bw == Approx(16.0));  // AMD
  CHECK(rankDevices(cpu).size() == 2);
}

TEST_CASE("dump then load gives the same graph, for every fixture", "[topo_graph]") {
  for (const char* name : kFixtures) {
    INFO(name);
    XmlNode xml;
    const TopoGraph g = loadFixture(name, &xml);
    XmlNode again;
    std::string error;
    REQUIRE(parseXml(writeXml(xml), &again, &error));
    TopoGraph g2;
    REQUIRE(graphFromXml(again, &g2, &error));
    CHECK(g2 == g);
    CHECK(writeXml(again) == writeXml(xml));
  }
}

TEST_CASE("PCIe bandwidth follows NCCL's table", "[topo_graph]") {
  CHECK(pciBandwidth("8.0 GT/s PCIe", "16") == Approx(12.0));
  CHECK(pciBandwidth("16.0 GT/s PCIe", "16") == Approx(24.0));
  CHECK(pciBandwidth("32.0 GT/s PCIe", "16") == Approx(48.0));
  CHECK(pciBandwidth("32 GT/s", "8") == Approx(24.0));
  CHECK(pciBandwidth("", "") == Approx(12.0));  // NCCL's defaults: Gen3 x16
}

TEST_CASE("what newer NCCL dumps add (c2c, unknown attributes, no numaid) loads and is kept",
          "[topo_graph]") {
  // The shape of an NCCL 2.27 dump of a single-GPU arm64 host: NICs with attributes ringcc does
  // not use, a <c2c> link, a CPU without numaid.
  const std::string text =
      "<system version=\"1\">\n"
      "  <cpu arch=\"arm64\" host_hash=\"0x1234\">\n"
      "    <pci busid=\"0000:01:00.0\" link_speed=\"32.0 GT/s PCIe\" link_width=\"4\">\n"
      "      <nic><net name=\"roce0\" speed=\"200000\" gdr=\"0\" net=\"1\" gin=\"1\"/></nic>\n"
      "    </pci>\n"
      "    <pci busid=\"0002:01:00.0\" link_speed=\"32.0 GT/s PCIe\" link_width=\"4\">\n"
      "      <nic><net name=\"roce1\" speed=\"200000\" gdr=\"0\"/></nic>\n"
      "    </pci>\n"
      "    <pci busid=\"000f:01:00.0\" link_speed=\"2.5 GT/s PCIe\" link_width=\"16\">\n"
      "      <gpu dev=\"0\" sm=\"121\" rank=\"0\" gdr=\"0\"><c2c bw=\"43125\" count=\"8\"/></gpu>\n"
      "    </pci>\n"
      "  </cpu>\n"
      "</system>\n";
  XmlNode root;
  std::string error;
  REQUIRE(parseXml(text, &root, &error));
  TopoGraph g;
  REQUIRE(graphFromXml(root, &g, &error));
  CHECK(g.count(TopoType::Gpu) == 1);
  CHECK(g.count(TopoType::Nic) == 2);
  CHECK(g.nodes[size_t(g.nodesOf(TopoType::Cpu)[0])].numa == -1);
  CHECK(g.nodes[size_t(g.nodesOf(TopoType::Nic)[0])].netBw == Approx(25.0));
  // Written back, nothing is lost: NCCL reading ringcc's copy sees what it wrote.
  const std::string written = writeXml(root);
  CHECK(written.find("net=\"1\" gin=\"1\"/>") != std::string::npos);
  CHECK(written.find("<c2c bw=\"43125\" count=\"8\"/>") != std::string::npos);
  CHECK(written.find("host_hash=\"0x1234\"") != std::string::npos);
}
