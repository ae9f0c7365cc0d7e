// Test helper: both sides of one connection made in this thread, the way ConnectionTable makes
// them across ranks (setup both, exchange infos, connect both), and infos over a pipe.
#pragma once

#include <unistd.h>

#include <memory>

#include "transports/transport.h"

namespace ringcc::test {

struct ConnPair {
  std::unique_ptr<Connector> recv, send;
  ConnInfo recvInfo, sendInfo;  // what each side's setup made
};

// Sets up both sides with their own specs, then connects them: the receiver first unless
// `senderFirst`. Returns the first failure (the outputs made until then stay in *out).
inline ncclResult_t connectPair(Transport& t, const ConnSpec& recvSpec, const ConnSpec& sendSpec,
                                ConnPair* out, bool senderFirst = false) {
  std::unique_ptr<PendingConnection> r, s;
  ncclResult_t rc = t.setup(ConnSide::Recv, recvSpec, &out->recvInfo, &r);
  if (rc != ncclSuccess) return rc;
  rc = t.setup(ConnSide::Send, sendSpec, &out->sendInfo, &s);
  if (rc != ncclSuccess) return rc;
  if (senderFirst) {
    rc = s->connect(out->recvInfo, &out->send);
    if (rc != ncclSuccess) return rc;
  }
  rc = r->connect(out->sendInfo, &out->recv);
  if (rc != ncclSuccess || senderFirst) return rc;
  return s->connect(out->recvInfo, &out->send);
}

inline ncclResult_t connectPair(Transport& t, const ConnSpec& spec, ConnPair* out,
                                bool senderFirst = false) {
  ConnSpec sendSpec = spec;
  std::swap(sendSpec.self, sendSpec.peer);
  return connectPair(t, spec, sendSpec, out, senderFirst);
}

inline bool writeAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

inline bool readAll(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = read(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// An info over a pipe: its wire header, then its payload.
inline bool writeInfo(int fd, const ConnInfo& info) {
  ConnInfoHeader h = connInfoHeader(info);
  return writeAll(fd, &h, sizeof(h)) && writeAll(fd, info.payload.data(), info.payload.size());
}

inline bool readInfo(int fd, ConnInfo* info) {
  ConnInfoHeader h;
  if (!readAll(fd, &h, sizeof(h))) return false;
  if (connInfoFromHeader(h, -1, info) != ncclSuccess) return false;
  return readAll(fd, info->payload.data(), info->payload.size());
}

}  // namespace ringcc::test
