// libFuzzer harness: the bootstrap root, as a stranger on the network meets it. Each input is
// sent on a fresh TCP connection to a root on loopback, and the connection is closed. The
// root must drop whatever does not prove the rendezvous' magic, reject well-formed hellos that
// are wrong, and never crash. Its magic is fixed (kMagic) so that the seed corpus can hold
// hellos that pass it and the fuzzer explores what comes after; a root that ended (a
// rendezvous completed, or timed out) is replaced by a new one on the next port.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <string>

#include "src/bootstrap/socket.h"
#include "src/bootstrap/root.h"

namespace {

constexpr uint64_t kMagic = 0x66757a7a726f6f74ull;  // "fuzzroot" (little-endian in the corpus)
ringcc::SocketAddress gRoot;
int gPort = 0;

void startRoot() {
  for (int tries = 0; tries < 100; ++tries) {
    gPort = 20000 + (gPort - 20000 + 1) % 20000;
    if (ringcc::parseAddress("127.0.0.1:" + std::to_string(gPort), "fuzz root", AF_INET,
                             &gRoot) == ncclSuccess &&
        ringcc::startRootAt(gRoot, kMagic) == ncclSuccess)
      return;
  }
  __builtin_trap();
}

int connectRoot() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd >= 0 && connect(fd, gRoot.sockaddrPtr(), gRoot.length()) == 0) return fd;
  if (fd >= 0) close(fd);
  return -1;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("NCCL_DEBUG", "", 1);
  setenv("NCCL_BOOTSTRAP_TIMEOUT", "1000", 1);  // a rendezvous left waiting ends soon
  gPort = 20000 + getpid() % 20000;
  startRoot();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fd = connectRoot();
  if (fd < 0) {  // the root ended: serve the next input from a new one
    startRoot();
    fd = connectRoot();
  }
  if (fd >= 0) {
    size_t off = 0;
    while (off < size) {
      const ssize_t n = send(fd, data + off, size - off, MSG_NOSIGNAL);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
  }
  close(fd);
  return 0;
}
