// TCP sockets for the bootstrap: an owning Socket, addresses, and bounded waits.
//
// Promises: every socket is non-blocking and close-on-exec; every call that waits takes a
// WaitLimit (a deadline plus up to three abort flags checked at least every kAbortPollMs) and
// returns within it; reads ask for an exact, caller-bounded length; EINTR and EAGAIN are
// handled inside. Failures are logged through fail() naming the socket's label (who is on
// the other end): a peer that vanishes, refuses or stays silent is ncclRemoteError, a local
// OS failure ncclSystemError. An abort returns ncclRemoteError and is logged at INFO only.
// Sockets are used by one thread at a time.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "nccl.h"

namespace ringcc {

// Longest a blocked socket call sleeps before it looks at its abort flags again.
inline constexpr int kAbortPollMs = 50;

// An IPv4 or IPv6 address and port in a form that can travel between ranks (host byte
// order; ranks share the byte order, and the magic check catches it when they do not).
struct WireAddress {
  uint16_t family;  // 4 or 6; anything else is invalid
  uint16_t port;
  uint32_t scopeId;
  uint8_t addr[16];  // IPv4 uses the first 4 bytes
};
static_assert(sizeof(WireAddress) == 24);

// A socket address, IPv4 or IPv6.
class SocketAddress {
 public:
  SocketAddress() = default;

  // 127.0.0.1 or ::1 with `port`.
  static SocketAddress loopback(int family, uint16_t port = 0);
  // From a sockaddr of family AF_INET/AF_INET6; invalid otherwise.
  static SocketAddress fromSockaddr(const sockaddr* sa, socklen_t len);
  // From the wire form; false (and *out untouched) if it is malformed.
  static bool fromWire(const WireAddress& w, SocketAddress* out);

  bool valid() const { return u_.sa.sa_family == AF_INET || u_.sa.sa_family == AF_INET6; }
  int family() const { return u_.sa.sa_family; }
  const sockaddr* sockaddrPtr() const { return &u_.sa; }
  socklen_t length() const;
  uint16_t port() const;
  void setPort(uint16_t port);
  bool isLoopback() const;
  WireAddress toWire() const;
  // "1.2.3.4:5" or "[::1]:5"; "<invalid>" for an empty address.
  std::string toString() const;

  bool operator==(const SocketAddress& o) const;

 private:
  union {
    sockaddr sa;
    sockaddr_in in4;
    sockaddr_in6 in6;
  } u_{};
};

// Parses "host:port", "[ipv6]:port" ("ipv4:port" and a resolvable host name work too) into
// *out. The port must be 1..65535. A bad text returns ncclInvalidArgument, its message
// naming `what` (e.g. "NCCL_COMM_ID"). Host names are resolved with getaddrinfo, preferring
// `family` (AF_UNSPEC: the first result).
ncclResult_t parseAddress(const std::string& text, const char* what, int family,
                          SocketAddress* out);

// When a blocking call gives up: a deadline, and abort flags that end it early.
class WaitLimit {
 public:
  explicit WaitLimit(int64_t timeoutMs, const std::atomic<bool>* abortA = nullptr,
                     const std::atomic<bool>* abortB = nullptr,
                     const std::atomic<bool>* abortC = nullptr);
  bool aborted() const;
  bool expired() const { return std::chrono::steady_clock::now() >= deadline_; }
  int64_t timeoutMs() const { return timeoutMs_; }
  // Milliseconds a poll() may sleep: the time left, at most kAbortPollMs, at least 0.
  int pollMs() const;

 private:
  std::chrono::steady_clock::time_point deadline_;
  int64_t timeoutMs_;
  const std::atomic<bool>* abort_[3];
};

// Outcome of one non-blocking read attempt.
enum class IoStatus { kProgress, kWouldBlock, kClosed, kError };

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd, std::string label = "");
  ~Socket() { close(); }
  Socket(Socket&& o) noexcept;
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();
  // Whether bytes wait to be read (peeked, not taken; never blocks).
  bool hasBytesWaiting() const;
  // Gives up ownership: returns the descriptor, which the caller must close.
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  // Who is on the other end, for messages ("root 1.2.3.4:5", "rank 3 (1.2.3.4:6)").
  const std::string& label() const { return label_; }
  void setLabel(std::string label) { label_ = std::move(label); }

  // A listening socket bound to `addr` (port 0: an ephemeral port). SO_REUSEADDR is set so a
  // fixed port (NCCL_COMM_ID) can be bound again right after the previous owner closed it.
  static ncclResult_t listen(const SocketAddress& addr, Socket* out);
  // Connects to `addr`, retrying refused or reset attempts until the limit expires (the
  // listener may not exist yet). The result is labelled `label`.
  static ncclResult_t connect(const SocketAddress& addr, const std::string& label,
                              const WaitLimit& limit, Socket* out);
  // Accepts one connection, waiting within `limit`.
  ncclResult_t accept(const WaitLimit& limit, Socket* out) const;
  // Accepts one connection if one is pending: *out stays invalid when none is.
  ncclResult_t tryAccept(Socket* out) const;

  ncclResult_t sendAll(const void* data, size_t size, const WaitLimit& limit);
  // With `closedBeforeData`, a connection closed before its first byte sets it and returns
  // ncclRemoteError without a WARN (the caller decides whether that is an error).
  ncclResult_t recvAll(void* data, size_t size, const WaitLimit& limit,
                       bool* closedBeforeData = nullptr);
  // One non-blocking recv of at most `size` bytes; *got receives the count on kProgress.
  IoStatus recvSome(void* data, size_t size, size_t* got);

  SocketAddress localAddress() const;
  SocketAddress peerAddress() const;

 private:
  int fd_ = -1;
  std::string label_;
};

// Sends `sendSize` bytes on `out` while receiving `recvSize` bytes on `in`, both within
// `limit`; neither side can deadlock the other whatever the sizes (ring steps use it).
ncclResult_t exchange(Socket& out, const void* sendData, size_t sendSize, Socket& in,
                      void* recvData, size_t recvSize, const WaitLimit& limit);

}  // namespace ringcc
