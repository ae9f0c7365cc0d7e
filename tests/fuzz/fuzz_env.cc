// libFuzzer harness: the environment parsers. Each takes arbitrary text from a user's
// environment; none may crash, hang or read out of bounds, whatever the text.
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/base/log.h"
#include "src/base/param.h"
#include "src/bootstrap/interfaces.h"
#include "src/tune/tune.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string unknown;
  (void)ringcc::parseProtocols(text, &unknown);  // NCCL_PROTO
  int64_t value = 0;
  (void)ringcc::parseSize(text, &value);  // every integer parameter
  (void)ringcc::parseSubsysMask(text.c_str());  // NCCL_DEBUG_SUBSYS
  (void)ringcc::parseSocketFamily(text);  // NCCL_SOCKET_FAMILY
  // NCCL_SOCKET_IFNAME: the filter, then a match against names cut from the same input.
  const ringcc::IfNameFilter filter = ringcc::IfNameFilter::parse(text);
  (void)filter.allows(text);
  (void)filter.allows(text.substr(0, size / 2));
  (void)filter.allows("lo");
  return 0;
}
