// Which local address the bootstrap listens on: NCCL_SOCKET_IFNAME and NCCL_SOCKET_FAMILY.
//
// NCCL_SOCKET_IFNAME is a comma list of interface name prefixes ("eth,ib"). A leading '^'
// turns it into a list to exclude ("^docker,lo"); a leading '=' (after any '^') makes the
// names exact instead of prefixes ("=eth0", "^=eth0"). NCCL_SOCKET_FAMILY is AF_INET or
// AF_INET6 (also ipv4/ipv6, 4/6). Choice, among up interfaces with an address of the allowed
// family (IPv6 link-local addresses are skipped, they need a scope to be reachable):
//   - an include list picks the first interface that matches it, loopback included;
//   - otherwise (no list or an exclude list), the first non-loopback match, and loopback only
//     when nothing else fits.
// Selection is a pure function over an interface list, so tests can feed fake machines.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "nccl.h"
#include "src/bootstrap/socket.h"

namespace ringcc {

struct NetInterface {
  std::string name;       // "eth0"
  SocketAddress address;  // port 0
};

// A parsed NCCL_SOCKET_IFNAME.
struct IfNameFilter {
  bool exclude = false;  // '^': the names are interfaces NOT to use
  bool exact = false;    // '=': whole names instead of prefixes
  std::vector<std::string> names;

  static IfNameFilter parse(const std::string& spec);
  bool empty() const { return names.empty(); }
  // True if interface `name` is allowed by this filter (an empty filter allows all).
  bool allows(const std::string& name) const;
};

// Parses NCCL_SOCKET_FAMILY: AF_UNSPEC for "", AF_INET, AF_INET6; -1 when unknown.
int parseSocketFamily(const std::string& text);

// This machine's up interfaces with an IPv4 or IPv6 address (IPv4 entries first, each family
// in getifaddrs order; IPv6 link-local skipped).
std::vector<NetInterface> listInterfaces();

// The interface the rules above choose from `list`; nullopt if none fits.
std::optional<NetInterface> selectInterface(const std::vector<NetInterface>& list,
                                            const std::string& ifname, int family);

// Reads NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY and selects from listInterfaces(). A family
// value that is not understood, or an interface list that matches nothing, is
// ncclInvalidArgument naming the variable.
ncclResult_t bootstrapInterface(NetInterface* out);

}  // namespace ringcc
