#include "src/bootstrap/interfaces.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <strings.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "src/base/error.h"
#include "src/base/log.h"
#include "src/base/param.h"

namespace ringcc {

IfNameFilter IfNameFilter::parse(const std::string& spec) {
  IfNameFilter f;
  size_t pos = 0;
  if (pos < spec.size() && spec[pos] == '^') {
    f.exclude = true;
    ++pos;
  }
  if (pos < spec.size() && spec[pos] == '=') {
    f.exact = true;
    ++pos;
  }
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    std::string name = spec.substr(pos, comma - pos);
    if (!name.empty()) f.names.push_back(name);
    pos = comma + 1;
  }
  return f;
}

bool IfNameFilter::allows(const std::string& name) const {
  if (names.empty()) return true;
  bool matched = false;
  for (const std::string& n : names) {
    if (exact ? name == n : name.compare(0, n.size(), n) == 0) {
      matched = true;
      break;
    }
  }
  return matched != exclude;
}

int parseSocketFamily(const std::string& text) {
  if (text.empty()) return AF_UNSPEC;
  for (const char* v4 : {"AF_INET", "ipv4", "inet", "4"})
    if (strcasecmp(text.c_str(), v4) == 0) return AF_INET;
  for (const char* v6 : {"AF_INET6", "ipv6", "inet6", "6"})
    if (strcasecmp(text.c_str(), v6) == 0) return AF_INET6;
  return -1;
}

std::vector<NetInterface> listInterfaces() {
  std::vector<NetInterface> v4, v6;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    LOG_WARN("bootstrap: getifaddrs failed: %s", strerror(errno));
    return {};
  }
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || !(it->ifa_flags & IFF_UP)) continue;
    int family = it->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(it->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr)) continue;
    }
    NetInterface nif;
    nif.name = it->ifa_name;
    nif.address = SocketAddress::fromSockaddr(
        it->ifa_addr, family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
    nif.address.setPort(0);
    (family == AF_INET ? v4 : v6).push_back(std::move(nif));
  }
  freeifaddrs(list);
  v4.insert(v4.end(), v6.begin(), v6.end());
  return v4;
}

std::optional<NetInterface> selectInterface(const std::vector<NetInterface>& list,
                                            const std::string& ifname, int family) {
  IfNameFilter filter = IfNameFilter::parse(ifname);
  const bool userChose = !filter.empty() && !filter.exclude;
  std::optional<NetInterface> loopback;
  for (const NetInterface& nif : list) {
    if (family != AF_UNSPEC && nif.address.family() != family) continue;
    if (!filter.allows(nif.name)) continue;
    if (userChose || !nif.address.isLoopback()) return nif;
    if (!loopback) loopback = nif;
  }
  return loopback;
}

ncclResult_t bootstrapInterface(NetInterface* out) {
  std::string familyText = paramString("SOCKET_FAMILY");
  int family = parseSocketFamily(familyText);
  if (family < 0)
    return fail(ncclInvalidArgument, "bootstrap",
                "NCCL_SOCKET_FAMILY='%s' is not AF_INET or AF_INET6", familyText.c_str());
  std::string ifname = paramString("SOCKET_IFNAME");
  std::vector<NetInterface> list = listInterfaces();
  std::optional<NetInterface> chosen = selectInterface(list, ifname, family);
  if (!chosen) {
    std::string names;
    for (const NetInterface& nif : list)
      names += (names.empty() ? "" : ",") + nif.name + " " + nif.address.toString();
    return fail(ncclInvalidArgument, "bootstrap",
                "NCCL_SOCKET_IFNAME='%s' NCCL_SOCKET_FAMILY='%s' match no up interface "
                "(have: %s)",
                ifname.c_str(), familyText.c_str(), names.c_str());
  }
  LOG_INFO(kLogBootstrap | kLogInit, "bootstrap: using interface %s address %s",
           chosen->name.c_str(), chosen->address.toString().c_str());
  *out = std::move(*chosen);
  return ncclSuccess;
}

}  // namespace ringcc
