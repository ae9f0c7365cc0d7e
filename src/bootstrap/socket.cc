#include "src/bootstrap/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "src/base/error.h"
#include "src/base/log.h"

namespace ringcc {
namespace {

constexpr const char* kWhere = "bootstrap";

ncclResult_t aborted(const std::string& label, const char* doing) {
  LOG_INFO(kLogBootstrap, "bootstrap: %s %s aborted", doing, label.c_str());
  return ncclRemoteError;
}

ncclResult_t timedOut(const std::string& label, const char* doing, size_t done, size_t size,
                      const WaitLimit& limit) {
  return fail(ncclRemoteError, kWhere, "%s %s timed out after %lld ms (%zu of %zu bytes)", doing,
              label.c_str(), static_cast<long long>(limit.timeoutMs()), done, size);
}

// Errors a connect attempt may meet while the listener is not there (yet): worth a retry.
bool retryableConnectError(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == ECONNRESET || err == EAGAIN ||
         err == ECONNABORTED;
}

void sleepMs(int ms) {
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Waits for `events` on fd within one poll slice. Returns poll's revents (0 on a quiet
// slice); -1 with errno set on a poll failure.
int pollOnce(int fd, short events, const WaitLimit& limit) {
  pollfd p{fd, events, 0};
  int rc = ::poll(&p, 1, limit.pollMs());
  if (rc < 0) return errno == EINTR ? 0 : -1;
  return rc == 0 ? 0 : p.revents;
}

// One connect attempt: 0 when connected, else the errno that ended it (ETIMEDOUT if the
// limit expired first, ECANCELED if aborted).
int connectOnce(const SocketAddress& addr, const WaitLimit& limit, int* fdOut) {
  int fd = ::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  int rc = ::connect(fd, addr.sockaddrPtr(), addr.length());
  int err = rc == 0 ? 0 : errno;
  if (err == EINPROGRESS || err == EINTR) {
    for (;;) {
      if (limit.aborted()) {
        err = ECANCELED;
        break;
      }
      int ev = pollOnce(fd, POLLOUT, limit);
      if (ev < 0) {
        err = errno;
        break;
      }
      if (ev != 0) {
        socklen_t len = sizeof(err);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        break;
      }
      if (limit.expired()) {
        err = ETIMEDOUT;
        break;
      }
    }
  }
  if (err == 0) {
    // Connecting to a free local port can make TCP connect a socket to itself; that is no
    // listener at all, so treat it as refused.
    Socket probe(fd);
    if (probe.localAddress() == probe.peerAddress()) return ECONNREFUSED;  // probe closes it
    *fdOut = probe.release();
    return 0;
  }
  ::close(fd);
  return err;
}

}  // namespace

// ---- SocketAddress ---------------------------------------------------------------------

SocketAddress SocketAddress::loopback(int family, uint16_t port) {
  SocketAddress a;
  if (family == AF_INET6) {
    a.u_.in6.sin6_family = AF_INET6;
    a.u_.in6.sin6_addr = in6addr_loopback;
    a.u_.in6.sin6_port = htons(port);
  } else {
    a.u_.in4.sin_family = AF_INET;
    a.u_.in4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.u_.in4.sin_port = htons(port);
  }
  return a;
}

SocketAddress SocketAddress::fromSockaddr(const sockaddr* sa, socklen_t len) {
  SocketAddress a;
  if (sa == nullptr) return a;
  if (sa->sa_family == AF_INET && len >= static_cast<socklen_t>(sizeof(sockaddr_in)))
    std::memcpy(&a.u_.in4, sa, sizeof(sockaddr_in));
  else if (sa->sa_family == AF_INET6 && len >= static_cast<socklen_t>(sizeof(sockaddr_in6)))
    std::memcpy(&a.u_.in6, sa, sizeof(sockaddr_in6));
  return a;
}

bool SocketAddress::fromWire(const WireAddress& w, SocketAddress* out) {
  SocketAddress a;
  if (w.family == 4) {
    a.u_.in4.sin_family = AF_INET;
    a.u_.in4.sin_port = htons(w.port);
    std::memcpy(&a.u_.in4.sin_addr, w.addr, 4);
  } else if (w.family == 6) {
    a.u_.in6.sin6_family = AF_INET6;
    a.u_.in6.sin6_port = htons(w.port);
    a.u_.in6.sin6_scope_id = w.scopeId;
    std::memcpy(&a.u_.in6.sin6_addr, w.addr, 16);
  } else {
    return false;
  }
  if (w.port == 0) return false;
  *out = a;
  return true;
}

socklen_t SocketAddress::length() const {
  return family() == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

uint16_t SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(u_.in4.sin_port);
  if (family() == AF_INET6) return ntohs(u_.in6.sin6_port);
  return 0;
}

void SocketAddress::setPort(uint16_t port) {
  if (family() == AF_INET) u_.in4.sin_port = htons(port);
  if (family() == AF_INET6) u_.in6.sin6_port = htons(port);
}

bool SocketAddress::isLoopback() const {
  if (family() == AF_INET) return (ntohl(u_.in4.sin_addr.s_addr) >> 24) == 127;
  if (family() == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&u_.in6.sin6_addr);
  return false;
}

WireAddress SocketAddress::toWire() const {
  WireAddress w{};
  if (family() == AF_INET) {
    w.family = 4;
    std::memcpy(w.addr, &u_.in4.sin_addr, 4);
  } else if (family() == AF_INET6) {
    w.family = 6;
    w.scopeId = u_.in6.sin6_scope_id;
    std::memcpy(w.addr, &u_.in6.sin6_addr, 16);
  }
  w.port = port();
  return w;
}

std::string SocketAddress::toString() const {
  char host[INET6_ADDRSTRLEN] = {};
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &u_.in4.sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(port());
  }
  if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &u_.in6.sin6_addr, host, sizeof(host));
    return "[" + std::string(host) + "]:" + std::to_string(port());
  }
  return "<invalid>";
}

bool SocketAddress::operator==(const SocketAddress& o) const {
  if (family() != o.family()) return false;
  if (family() == AF_INET)
    return u_.in4.sin_port == o.u_.in4.sin_port &&
           u_.in4.sin_addr.s_addr == o.u_.in4.sin_addr.s_addr;
  if (family() == AF_INET6)
    return u_.in6.sin6_port == o.u_.in6.sin6_port &&
           std::memcmp(&u_.in6.sin6_addr, &o.u_.in6.sin6_addr, 16) == 0;
  return true;  // two invalid addresses
}

ncclResult_t parseAddress(const std::string& text, const char* what, int family,
                          SocketAddress* out) {
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return fail(ncclInvalidArgument, kWhere, "%s '%s' is malformed: expected [ipv6]:port", what,
                  text.c_str());
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos)
      return fail(ncclInvalidArgument, kWhere, "%s '%s' has no port: expected host:port", what,
                  text.c_str());
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string::npos)
      return fail(ncclInvalidArgument, kWhere,
                  "%s '%s' is ambiguous: write an IPv6 address as [addr]:port", what, text.c_str());
  }
  if (host.empty())
    return fail(ncclInvalidArgument, kWhere, "%s '%s' has no host", what, text.c_str());
  char* end = nullptr;
  long p = port.empty() ? -1 : std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p < 1 || p > 65535 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return fail(ncclInvalidArgument, kWhere, "%s '%s' has a bad port (want 1..65535)", what,
                text.c_str());

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr)
    return fail(ncclInvalidArgument, kWhere, "%s '%s': cannot resolve '%s': %s", what, text.c_str(),
                host.c_str(), gai_strerror(rc));
  SocketAddress chosen;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    SocketAddress a = SocketAddress::fromSockaddr(ai->ai_addr, ai->ai_addrlen);
    if (!a.valid()) continue;
    if (!chosen.valid()) chosen = a;
    if (family != AF_UNSPEC && a.family() == family) {
      chosen = a;
      break;
    }
  }
  freeaddrinfo(res);
  if (!chosen.valid())
    return fail(ncclInvalidArgument, kWhere, "%s '%s': no IPv4/IPv6 address for '%s'", what,
                text.c_str(), host.c_str());
  *out = chosen;
  return ncclSuccess;
}

// ---- WaitLimit ---------------------------------------------------------------------------

WaitLimit::WaitLimit(int64_t timeoutMs, const std::atomic<bool>* abortA,
                     const std::atomic<bool>* abortB, const std::atomic<bool>* abortC)
    : deadline_(std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs)),
      timeoutMs_(timeoutMs),
      abort_{abortA, abortB, abortC} {}

bool WaitLimit::aborted() const {
  for (const std::atomic<bool>* f : abort_)
    if (f != nullptr && f->load(std::memory_order_acquire)) return true;
  return false;
}

int WaitLimit::pollMs() const {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline_ - std::chrono::steady_clock::now())
                  .count();
  // Round up so a poll does not wake a hair before the deadline and spin.
  return static_cast<int>(std::clamp<int64_t>(left + 1, 0, kAbortPollMs));
}

// ---- Socket ------------------------------------------------------------------------------

Socket::Socket(int fd, std::string label) : fd_(fd), label_(std::move(label)) {}

Socket::Socket(Socket&& o) noexcept : fd_(o.fd_), label_(std::move(o.label_)) { o.fd_ = -1; }

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    label_ = std::move(o.label_);
    o.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool Socket::hasBytesWaiting() const {
  char b;
  return fd_ >= 0 && ::recv(fd_, &b, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

SocketAddress Socket::localAddress() const {
  sockaddr_in6 sa{};
  socklen_t len = sizeof(sa);
  if (fd_ < 0 || getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return {};
  return SocketAddress::fromSockaddr(reinterpret_cast<sockaddr*>(&sa), len);
}

SocketAddress Socket::peerAddress() const {
  sockaddr_in6 sa{};
  socklen_t len = sizeof(sa);
  if (fd_ < 0 || getpeername(fd_, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return {};
  return SocketAddress::fromSockaddr(reinterpret_cast<sockaddr*>(&sa), len);
}

ncclResult_t Socket::listen(const SocketAddress& addr, Socket* out) {
  int fd = ::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return fail(ncclSystemError, kWhere, "socket() for a listener on %s failed: %s",
                addr.toString().c_str(), strerror(errno));
  Socket s(fd, "listener " + addr.toString());
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, addr.sockaddrPtr(), addr.length()) != 0)
    return fail(ncclSystemError, kWhere, "cannot bind a listener to %s: %s",
                addr.toString().c_str(), strerror(errno));
  if (::listen(fd, SOMAXCONN) != 0)
    return fail(ncclSystemError, kWhere, "listen() on %s failed: %s", addr.toString().c_str(),
                strerror(errno));
  s.setLabel("listener " + s.localAddress().toString());
  *out = std::move(s);
  return ncclSuccess;
}

ncclResult_t Socket::connect(const SocketAddress& addr, const std::string& label,
                             const WaitLimit& limit, Socket* out) {
  if (!addr.valid())
    return fail(ncclInvalidArgument, kWhere, "connect to %s: invalid address", label.c_str());
  int backoffMs = 1;
  int lastErr = 0;
  for (;;) {
    if (limit.aborted()) return aborted(label, "connect to");
    int fd = -1;
    int err = connectOnce(addr, limit, &fd);
    if (err == 0) {
      setNoDelay(fd);
      *out = Socket(fd, label);
      return ncclSuccess;
    }
    if (err == ECANCELED) return aborted(label, "connect to");
    if (err != ETIMEDOUT || lastErr == 0) lastErr = err;
    if (!retryableConnectError(err))
      return fail(ncclSystemError, kWhere, "connect to %s failed: %s", label.c_str(),
                  strerror(err));
    if (limit.expired())
      return fail(ncclRemoteError, kWhere, "could not connect to %s within %lld ms: %s",
                  label.c_str(), static_cast<long long>(limit.timeoutMs()), strerror(lastErr));
    sleepMs(std::min(backoffMs, limit.pollMs()));
    backoffMs = std::min(backoffMs * 2, kAbortPollMs);
  }
}

ncclResult_t Socket::tryAccept(Socket* out) const {
  for (;;) {
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      setNoDelay(fd);
      *out = Socket(fd);
      out->setLabel("connection from " + out->peerAddress().toString());
      return ncclSuccess;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return ncclSuccess;
    return fail(ncclSystemError, kWhere, "accept on %s failed: %s", label_.c_str(),
                strerror(errno));
  }
}

ncclResult_t Socket::accept(const WaitLimit& limit, Socket* out) const {
  for (;;) {
    RINGCC_CHECK(tryAccept(out));
    if (out->valid()) return ncclSuccess;
    if (limit.aborted()) return aborted(label_, "accept on");
    if (limit.expired())
      return fail(ncclRemoteError, kWhere, "no connection on %s within %lld ms", label_.c_str(),
                  static_cast<long long>(limit.timeoutMs()));
    if (pollOnce(fd_, POLLIN, limit) < 0)
      return fail(ncclSystemError, kWhere, "poll on %s failed: %s", label_.c_str(),
                  strerror(errno));
  }
}

IoStatus Socket::recvSome(void* data, size_t size, size_t* got) {
  for (;;) {
    ssize_t n = ::recv(fd_, data, size, 0);
    if (n > 0) {
      *got = static_cast<size_t>(n);
      return IoStatus::kProgress;
    }
    if (n == 0) return size == 0 ? IoStatus::kProgress : IoStatus::kClosed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return IoStatus::kWouldBlock;
    return IoStatus::kError;
  }
}

ncclResult_t Socket::sendAll(const void* data, size_t size, const WaitLimit& limit) {
  const char* p = static_cast<const char*>(data);
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::send(fd_, p + done, size - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
      return fail(ncclRemoteError, kWhere, "send to %s failed: %s", label_.c_str(),
                  strerror(errno));
    if (limit.aborted()) return aborted(label_, "send to");
    if (limit.expired()) return timedOut(label_, "send to", done, size, limit);
    if (pollOnce(fd_, POLLOUT, limit) < 0)
      return fail(ncclSystemError, kWhere, "poll on %s failed: %s", label_.c_str(),
                  strerror(errno));
  }
  return ncclSuccess;
}

ncclResult_t Socket::recvAll(void* data, size_t size, const WaitLimit& limit,
                             bool* closedBeforeData) {
  char* p = static_cast<char*>(data);
  size_t done = 0;
  while (done < size) {
    size_t got = 0;
    switch (recvSome(p + done, size - done, &got)) {
      case IoStatus::kProgress:
        done += got;
        continue;
      case IoStatus::kClosed:
        if (closedBeforeData != nullptr && done == 0) {
          *closedBeforeData = true;
          return ncclRemoteError;
        }
        return fail(ncclRemoteError, kWhere, "%s closed the connection (%zu of %zu bytes read)",
                    label_.c_str(), done, size);
      case IoStatus::kError:
        if (closedBeforeData != nullptr && done == 0 && errno == ECONNRESET) {
          *closedBeforeData = true;
          return ncclRemoteError;
        }
        return fail(ncclRemoteError, kWhere, "receive from %s failed: %s", label_.c_str(),
                    strerror(errno));
      case IoStatus::kWouldBlock:
        break;
    }
    if (limit.aborted()) return aborted(label_, "receive from");
    if (limit.expired()) return timedOut(label_, "receive from", done, size, limit);
    if (pollOnce(fd_, POLLIN, limit) < 0)
      return fail(ncclSystemError, kWhere, "poll on %s failed: %s", label_.c_str(),
                  strerror(errno));
  }
  return ncclSuccess;
}

ncclResult_t exchange(Socket& out, const void* sendData, size_t sendSize, Socket& in,
                      void* recvData, size_t recvSize, const WaitLimit& limit) {
  const char* sp = static_cast<const char*>(sendData);
  char* rp = static_cast<char*>(recvData);
  size_t sent = 0, received = 0;
  while (sent < sendSize || received < recvSize) {
    bool progress = false;
    if (sent < sendSize) {
      ssize_t n = ::send(out.fd(), sp + sent, sendSize - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<size_t>(n);
        progress = true;
      } else if (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
        return fail(ncclRemoteError, kWhere, "send to %s failed: %s", out.label().c_str(),
                    strerror(errno));
      }
    }
    if (received < recvSize) {
      size_t got = 0;
      switch (in.recvSome(rp + received, recvSize - received, &got)) {
        case IoStatus::kProgress:
          received += got;
          progress = true;
          break;
        case IoStatus::kClosed:
          return fail(ncclRemoteError, kWhere, "%s closed the connection (%zu of %zu bytes read)",
                      in.label().c_str(), received, recvSize);
        case IoStatus::kError:
          return fail(ncclRemoteError, kWhere, "receive from %s failed: %s", in.label().c_str(),
                      strerror(errno));
        case IoStatus::kWouldBlock:
          break;
      }
    }
    if (progress) continue;
    if (limit.aborted()) return aborted(in.label(), "exchange with");
    if (limit.expired()) {
      if (received < recvSize)
        return timedOut(in.label(), "receive from", received, recvSize, limit);
      return timedOut(out.label(), "send to", sent, sendSize, limit);
    }
    pollfd p[2];
    int np = 0;
    if (sent < sendSize) p[np++] = {out.fd(), POLLOUT, 0};
    if (received < recvSize) p[np++] = {in.fd(), POLLIN, 0};
    if (::poll(p, np, limit.pollMs()) < 0 && errno != EINTR)
      return fail(ncclSystemError, kWhere, "poll failed: %s", strerror(errno));
  }
  return ncclSuccess;
}

}  // namespace ringcc
