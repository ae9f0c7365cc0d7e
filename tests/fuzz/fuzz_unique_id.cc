// libFuzzer harness: the unique id, as a rank gets it from anyone (a file, the environment, a
// store): ncclUniqueId bytes, and the socket address it carries. Parsing must refuse what
// bootstrapMakeId did not make, and never crash.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "src/bootstrap/socket.h"
#include "src/bootstrap/unique_id.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  std::memcpy(&id, data, size < sizeof(id) ? size : sizeof(id));
  ringcc::BootstrapId parsed;
  if (ringcc::bootstrapParseId(id, &parsed) == ncclSuccess) {
    // What parses must pack back to the same id (the rest of the 128 bytes is zero).
    ncclUniqueId again;
    ringcc::bootstrapMakeId(parsed, &again);
    ringcc::BootstrapId reparsed;
    if (ringcc::bootstrapParseId(again, &reparsed) != ncclSuccess) __builtin_trap();
    if (reparsed.magic != parsed.magic || !(reparsed.root == parsed.root)) __builtin_trap();
  }
  ringcc::WireAddress wire;
  std::memset(&wire, 0, sizeof(wire));
  std::memcpy(&wire, data, size < sizeof(wire) ? size : sizeof(wire));
  ringcc::SocketAddress addr;
  (void)ringcc::SocketAddress::fromWire(wire, &addr);
  return 0;
}
