// libFuzzer harness: connection infos as they arrive from a peer over the bootstrap: a
// ConnInfoHeader, then a payload that each transport unpacks. A malformed one must be an
// error, never a crash or a huge allocation.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "transports/p2p/p2p_transport.h"
#include "transports/shm/shm_transport.h"
#include "transports/transport.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ringcc::ConnInfoHeader header;
  if (size < sizeof(header)) return 0;
  std::memcpy(&header, data, sizeof(header));
  data += sizeof(header);
  size -= sizeof(header);
  // Announced sizes beyond what arrived are cut to it, as the caller receives no more.
  if (header.payloadBytes > size) header.payloadBytes = size;
  ringcc::ConnInfo info;
  if (ringcc::connInfoFromHeader(header, 1, &info) != ncclSuccess) return 0;
  if (!info.payload.empty()) std::memcpy(info.payload.data(), data, info.payload.size());
  ringcc::ShmRecvInfo shmRecv;
  ringcc::ShmSendInfo shmSend;
  (void)ringcc::unpackConnInfo(info, "shm", ringcc::kShmInfoVersion, ringcc::ConnSide::Recv,
                               &shmRecv, 1, "fuzz");
  (void)ringcc::unpackConnInfo(info, "shm", ringcc::kShmInfoVersion, ringcc::ConnSide::Send,
                               &shmSend, 1, "fuzz");
  std::vector<uint8_t> tail;
  uint64_t fixed = 0;
  (void)ringcc::unpackConnInfo(info, info.transport, info.version, info.side, &fixed, 1, "fuzz",
                               &tail);
  return 0;
}
