// A small XML reader and writer for NCCL's topology files (NCCL_TOPO_FILE,
// NCCL_TOPO_DUMP_FILE). NCCL's dumps are plain: elements with attributes, no text, no
// namespaces, e.g.
//   <system version="1">
//     <cpu numaid="0" affinity="ffffffff" arch="x86_64" vendor="GenuineIntel">
//       <pci busid="0000:19:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">
//         <gpu dev="0" sm="90" rank="0" gdr="1"><nvlink target="..." count="18"/></gpu>
//       </pci>
//     </cpu>
//   </system>
// The reader takes any input without crashing (it is fuzzed: tests/fuzz/fuzz_topo_xml.cc) and
// answers bad input with an error naming the line. It accepts an <?xml?> prolog, comments,
// either quote, and the five predefined entities; it refuses text between elements.
// The writer prints what NCCL's ncclTopoDumpXmlToFile prints: two spaces of indent per level,
// attributes in order, `<x/>` for an element without children.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nccl.h"

namespace ringcc {

struct XmlNode {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;  // in file order
  std::vector<XmlNode> subs;
  int line = 0;  // where the element starts (0: made in memory)

  // The attribute's value, or nullptr.
  const std::string* attr(std::string_view key) const;
  std::string attrOr(std::string_view key, std::string_view fallback) const;
  // Sets (or replaces) an attribute, keeping the first position it had.
  void set(std::string_view key, std::string_view value);
  XmlNode& add(std::string_view childName);
};

// Limits that keep hostile input from exhausting the stack or memory.
constexpr int kXmlMaxDepth = 64;
constexpr size_t kXmlMaxNodes = 1 << 20;
constexpr size_t kXmlMaxToken = 4096;  // characters in a name or value

// Parses one document (one top element). On failure returns false and sets *error to
// "line N: what", leaving *root unspecified.
bool parseXml(std::string_view text, XmlNode* root, std::string* error);

// The document as NCCL writes it (ends with a newline).
std::string writeXml(const XmlNode& root);

// Reads and parses `path`; a missing file or bad XML is ncclInvalidArgument with a WARN that
// names `what` (the variable, e.g. "NCCL_TOPO_FILE"), the file and the line.
ncclResult_t readXmlFile(const std::string& path, const char* what, XmlNode* root);
// Writes `root` to `path`; ncclSystemError with a WARN if the file cannot be written.
ncclResult_t writeXmlFile(const std::string& path, const char* what, const XmlNode& root);

}  // namespace ringcc
