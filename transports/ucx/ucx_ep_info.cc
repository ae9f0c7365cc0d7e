#include "transports/ucx/ucx_ep_info.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <vector>

namespace ringcc {
namespace {

// The lines that describe lanes ("lane[0]: ...").
std::vector<std::string> laneLines(const std::string& info) {
  std::vector<std::string> lines;
  for (size_t pos = info.find("lane["); pos != std::string::npos;
       pos = info.find("lane[", pos + 1)) {
    const size_t eol = info.find('\n', pos);
    lines.push_back(info.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos));
  }
  return lines;
}

}  // namespace

std::string endpointInfo(ucp_ep_h ep) {
  char* text = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&text, &len);
  if (f == nullptr) return "";
  ucp_ep_print_info(ep, f);
  std::fclose(f);
  std::string all(text ? text : "", len);
  std::free(text);
  return all;
}

std::string laneTransports(const std::string& info) {
  std::string found;
  for (const std::string& line : laneLines(info)) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    size_t b = line.rfind(' ', slash), e = line.find_first_of(" \t", slash);
    b = b == std::string::npos ? 0 : b + 1;
    std::string tl = line.substr(b, e == std::string::npos ? std::string::npos : e - b);
    if (const size_t colon = tl.find(':'); colon != std::string::npos) tl = tl.substr(colon + 1);
    if (found.find(tl) == std::string::npos) found += (found.empty() ? "" : " ") + tl;
  }
  return found.empty() ? "?" : found;
}

bool lanesServe(const std::string& info, const std::string& usage) {
  // Usages follow the "->" of a lane line, as words: "rma#0", or "am" without a number.
  for (const std::string& line : laneLines(info)) {
    const size_t arrow = line.find("->");
    if (arrow == std::string::npos) continue;
    std::istringstream words(line.substr(arrow + 2));
    for (std::string w; words >> w;)
      if (w == usage || w.rfind(usage + "#", 0) == 0) return true;
  }
  return false;
}

}  // namespace ringcc
