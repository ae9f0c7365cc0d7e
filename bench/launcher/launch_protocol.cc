#include "bench/launcher/launch_protocol.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cerrno>
#include <cstring>

namespace ringcc::bench {
namespace {

void putU32(std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }

uint32_t getU32(const std::string& s, size_t at) {
  uint32_t v;
  std::memcpy(&v, s.data() + at, 4);
  return v;
}

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool writeAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::string uniqueIdToHex(const ncclUniqueId& id) {
  static const char* digits = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * NCCL_UNIQUE_ID_BYTES);
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; ++i) {
    unsigned char b = static_cast<unsigned char>(id.internal[i]);
    hex += digits[b >> 4];
    hex += digits[b & 15];
  }
  return hex;
}

std::optional<LaunchedRank> launchedRankFromEnv() {
  const char* rank = getenv(kEnvRank);
  const char* nranks = getenv(kEnvNranks);
  const char* hex = getenv(kEnvUniqueId);
  if (!rank || !nranks || !hex) return std::nullopt;
  auto id = uniqueIdFromHex(hex);
  if (!id) return std::nullopt;
  return LaunchedRank{atoi(rank), atoi(nranks), *id};
}

std::optional<ncclUniqueId> uniqueIdFromHex(const std::string& hex) {
  if (hex.size() != 2 * NCCL_UNIQUE_ID_BYTES) return std::nullopt;
  ncclUniqueId id;
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; ++i) {
    int hi = hexDigit(hex[2 * i]), lo = hexDigit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    id.internal[i] = static_cast<char>((hi << 4) | lo);
  }
  return id;
}

std::string encodeCtrl(const CtrlMessage& m) {
  std::string s;
  putU32(s, kCtrlMagic);
  putU32(s, static_cast<uint32_t>(m.op));
  putU32(s, static_cast<uint32_t>(m.reduce));
  putU32(s, static_cast<uint32_t>(m.payload.size()));
  return s + m.payload;
}

std::optional<CtrlMessage> decodeCtrl(std::string& buf, bool& bad) {
  bad = false;
  if (buf.size() < kCtrlHeaderBytes) return std::nullopt;
  uint32_t op = getU32(buf, 4), reduce = getU32(buf, 8), len = getU32(buf, 12);
  if (getU32(buf, 0) != kCtrlMagic || len > kCtrlMaxPayload ||
      (op != static_cast<uint32_t>(CtrlOp::Allreduce) &&
       op != static_cast<uint32_t>(CtrlOp::Gather)) ||
      reduce > static_cast<uint32_t>(CtrlReduce::Max)) {
    bad = true;
    return std::nullopt;
  }
  if (buf.size() < kCtrlHeaderBytes + len) return std::nullopt;
  CtrlMessage m;
  m.op = static_cast<CtrlOp>(op);
  m.reduce = static_cast<CtrlReduce>(reduce);
  m.payload = buf.substr(kCtrlHeaderBytes, len);
  buf.erase(0, kCtrlHeaderBytes + len);
  return m;
}

bool combineCtrl(const std::vector<CtrlMessage>& requests, CtrlMessage& reply, std::string& err) {
  if (requests.empty()) {
    err = "no requests";
    return false;
  }
  const CtrlMessage& first = requests[0];
  for (size_t i = 1; i < requests.size(); ++i) {
    const CtrlMessage& r = requests[i];
    bool sameSize = first.op == CtrlOp::Gather || r.payload.size() == first.payload.size();
    if (r.op != first.op || r.reduce != first.reduce || !sameSize) {
      err = "process " + std::to_string(i) + " made a different control request than process 0";
      return false;
    }
  }
  reply = CtrlMessage{first.op, first.reduce, {}};
  if (first.op == CtrlOp::Gather) {
    for (const CtrlMessage& r : requests) {
      putU32(reply.payload, static_cast<uint32_t>(r.payload.size()));
      reply.payload += r.payload;
    }
    return true;
  }
  if (first.payload.size() % sizeof(double) != 0) {
    err = "allreduce payload is not whole doubles";
    return false;
  }
  size_t n = first.payload.size() / sizeof(double);
  std::vector<double> acc(n), v(n);
  std::memcpy(acc.data(), first.payload.data(), n * sizeof(double));
  for (size_t i = 1; i < requests.size(); ++i) {
    std::memcpy(v.data(), requests[i].payload.data(), n * sizeof(double));
    for (size_t k = 0; k < n; ++k) {
      switch (first.reduce) {
        case CtrlReduce::Sum: acc[k] += v[k]; break;
        case CtrlReduce::Min: acc[k] = std::min(acc[k], v[k]); break;
        case CtrlReduce::Max: acc[k] = std::max(acc[k], v[k]); break;
      }
    }
  }
  reply.payload.assign(reinterpret_cast<const char*>(acc.data()), n * sizeof(double));
  return true;
}

bool ControlClient::roundTrip(const CtrlMessage& request, CtrlMessage& reply, std::string& err) {
  if (!writeAll(fd_, encodeCtrl(request))) {
    err = std::string("control channel to ringcc-run: write failed: ") + std::strerror(errno);
    return false;
  }
  std::string buf;
  char chunk[65536];
  while (true) {
    bool bad = false;
    if (std::optional<CtrlMessage> m = decodeCtrl(buf, bad)) {
      reply = std::move(*m);
      return true;
    }
    if (bad) {
      err = "control channel to ringcc-run: malformed reply";
      return false;
    }
    ssize_t n = ::read(fd_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = "control channel to ringcc-run closed (another process exited or failed)";
      return false;
    }
    buf.append(chunk, static_cast<size_t>(n));
  }
}

bool ControlClient::allreduce(double* values, size_t n, CtrlReduce op, std::string& err) {
  CtrlMessage req{CtrlOp::Allreduce, op,
                  std::string(reinterpret_cast<const char*>(values), n * sizeof(double))};
  CtrlMessage reply;
  if (!roundTrip(req, reply, err)) return false;
  if (reply.payload.size() != n * sizeof(double)) {
    err = "control channel: allreduce reply has the wrong size";
    return false;
  }
  std::memcpy(values, reply.payload.data(), n * sizeof(double));
  return true;
}

bool ControlClient::gather(const std::string& mine, std::vector<std::string>& all,
                           std::string& err) {
  CtrlMessage reply;
  if (!roundTrip(CtrlMessage{CtrlOp::Gather, CtrlReduce::Sum, mine}, reply, err)) return false;
  all.clear();
  size_t at = 0;
  while (at + 4 <= reply.payload.size()) {
    uint32_t len = getU32(reply.payload, at);
    at += 4;
    if (at + len > reply.payload.size()) break;
    all.push_back(reply.payload.substr(at, len));
    at += len;
  }
  if (at != reply.payload.size()) {
    err = "control channel: malformed gather reply";
    return false;
  }
  return true;
}

}  // namespace ringcc::bench
