// The topology fixtures (tests/topo/fixtures), loaded for the tests.
#pragma once

#include <catch2/catch.hpp>
#include <string>

#include "src/topo/graph.h"
#include "src/topo/xml.h"

namespace ringcc::test {

inline std::string fixturePath(const std::string& name) {
  return std::string(RINGCC_SOURCE_ROOT) + "/tests/topo/fixtures/" + name + ".xml";
}

inline const char* const kFixtures[] = {"dgx_h100", "pcie_8gpu", "cpu_2socket", "nvlink_4gpu_mesh"};

inline TopoGraph loadFixture(const std::string& name, XmlNode* xmlOut = nullptr) {
  XmlNode xml;
  REQUIRE(readXmlFile(fixturePath(name), "fixture", &xml) == ncclSuccess);
  TopoGraph g;
  std::string error;
  if (!graphFromXml(xml, &g, &error)) FAIL(name << ": " << error);
  if (xmlOut) *xmlOut = xml;
  return g;
}

}  // namespace ringcc::test
