// Connection infos (their checked packing and wire header) and the checks every transport's
// setup and connect share.
#include <cstring>
#include <string>

#include "src/base/error.h"
#include "transports/transport.h"

namespace ringcc {
namespace {

// Whether a fixed-size name field holds its terminating NUL.
bool terminated(const char (&name)[kTransportNameBytes]) {
  return std::memchr(name, '\0', sizeof(name)) != nullptr;
}

}  // namespace

const char* connSideName(ConnSide s) { return s == ConnSide::Recv ? "recv" : "send"; }

ConnInfoHeader connInfoHeader(const ConnInfo& info) {
  ConnInfoHeader h;
  std::memset(&h, 0, sizeof(h));
  std::memcpy(h.transport, info.transport, sizeof(h.transport));
  h.transport[sizeof(h.transport) - 1] = '\0';
  h.version = info.version;
  h.side = static_cast<uint8_t>(info.side);
  h.payloadBytes = info.payload.size();
  h.geometry = info.geometry;
  return h;
}

ncclResult_t connInfoFromHeader(const ConnInfoHeader& h, int peerRank, ConnInfo* info) {
  // Whatever arrives may come from a rank of another build, or be garbage: check it all before
  // anything is sized from it.
  if (!terminated(h.transport))
    return failPeer(ncclRemoteError, peerRank, "connection info",
                    "the transport name is not terminated");
  if (h.side != static_cast<uint8_t>(ConnSide::Recv) &&
      h.side != static_cast<uint8_t>(ConnSide::Send))
    return failPeer(ncclRemoteError, peerRank, "connection info", "unknown side %u", h.side);
  if (h.payloadBytes > kMaxConnInfoBytes)
    return failPeer(ncclRemoteError, peerRank, "connection info",
                    "%s info announces %llu payload bytes, more than %llu", h.transport,
                    static_cast<unsigned long long>(h.payloadBytes),
                    static_cast<unsigned long long>(kMaxConnInfoBytes));
  std::memcpy(info->transport, h.transport, sizeof(info->transport));
  info->version = h.version;
  info->side = static_cast<ConnSide>(h.side);
  info->geometry = h.geometry;  // checked by the connect that takes this info
  info->payload.assign(h.payloadBytes, 0);
  return ncclSuccess;
}

ncclResult_t packConnInfoBytes(const char* transport, uint32_t version, ConnSide side,
                               const void* fixed, size_t fixedBytes, std::span<const uint8_t> tail,
                               ConnInfo* out) {
  size_t nameBytes = std::strlen(transport);
  if (nameBytes >= kTransportNameBytes)
    return fail(ncclInvalidArgument, "connection info", "transport name '%s' is longer than %zu",
                transport, kTransportNameBytes - 1);
  uint64_t total = uint64_t{fixedBytes} + tail.size();
  if (total > kMaxConnInfoBytes)
    return fail(ncclInvalidArgument, "connection info", "%s info of %llu bytes exceeds %llu bytes",
                transport, static_cast<unsigned long long>(total),
                static_cast<unsigned long long>(kMaxConnInfoBytes));
  std::memset(out->transport, 0, sizeof(out->transport));
  std::memcpy(out->transport, transport, nameBytes);
  out->version = version;
  out->side = side;
  out->payload.resize(total);
  if (fixedBytes > 0) std::memcpy(out->payload.data(), fixed, fixedBytes);
  if (!tail.empty()) std::memcpy(out->payload.data() + fixedBytes, tail.data(), tail.size());
  return ncclSuccess;
}

ncclResult_t unpackConnInfoBytes(const ConnInfo& info, const char* transport, uint32_t version,
                                 ConnSide from, void* fixed, size_t fixedBytes,
                                 std::vector<uint8_t>* tail, int peerRank, const char* where) {
  if (!terminated(info.transport) || std::strcmp(info.transport, transport) != 0)
    return failPeer(ncclInvalidUsage, peerRank, where,
                    "connection info was made by transport '%.*s', not '%s' (both ranks must "
                    "select the same transport)",
                    static_cast<int>(kTransportNameBytes - 1), info.transport, transport);
  if (info.side != from)
    return failPeer(ncclInvalidUsage, peerRank, where,
                    "%s connection info comes from a %s side, expected the %s side's", transport,
                    connSideName(info.side), connSideName(from));
  bool sizeOk = tail ? info.payload.size() >= fixedBytes : info.payload.size() == fixedBytes;
  if (info.version != version || !sizeOk)
    return failPeer(ncclInvalidUsage, peerRank, where,
                    "%s connection info has version %u size %zu, expected version %u size %s%zu "
                    "(ranks run different ringcc builds?)",
                    transport, info.version, info.payload.size(), version, tail ? ">= " : "",
                    fixedBytes);
  if (fixedBytes > 0) std::memcpy(fixed, info.payload.data(), fixedBytes);
  if (tail)
    tail->assign(info.payload.begin() + static_cast<ptrdiff_t>(fixedBytes), info.payload.end());
  return ncclSuccess;
}

ncclResult_t Transport::setup(ConnSide side, const ConnSpec& spec, ConnInfo* info,
                              std::unique_ptr<PendingConnection>* pending) {
  if (info == nullptr || pending == nullptr)
    return failPeer(ncclInvalidArgument, spec.peer.rank, name(),
                    "setup: info and pending must not be NULL");
  pending->reset();
  *info = ConnInfo{};
  std::string where = std::string(name()) + " setup " + connSideName(side);
  RINGCC_CHECK(checkConnSpec(spec, where.c_str()));
  RINGCC_CHECK(setupImpl(side, spec, info, pending));
  info->geometry = connGeometry(spec);
  return ncclSuccess;
}

ncclResult_t PendingConnection::connect(const ConnInfo& remote, std::unique_ptr<Connector>* conn) {
  if (conn == nullptr)
    return failPeer(ncclInvalidArgument, spec_.peer.rank, "connect", "conn must not be NULL");
  conn->reset();
  if (used_)
    return failPeer(ncclInvalidUsage, spec_.peer.rank, "connect",
                    "this %s side of channel %d was already connected (or failed to)",
                    connSideName(side_), spec_.channel);
  used_ = true;
  const char* where = side_ == ConnSide::Recv ? "connect recv" : "connect send";
  RINGCC_CHECK(checkConnGeometry(spec_, remote.geometry, where));
  return connectImpl(remote, conn);
}

const char* peerStateName(PeerState s) {
  switch (s) {
    case PeerState::Open:
      return "open";
    case PeerState::Closed:
      return "closed";
    case PeerState::Dead:
      return "dead";
  }
  return "?";
}

}  // namespace ringcc
