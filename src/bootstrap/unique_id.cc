#include "src/bootstrap/unique_id.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "src/base/error.h"
#include "src/base/log.h"
#include "src/base/param.h"
#include "src/bootstrap/interfaces.h"
#include "src/bootstrap/root.h"
#include "src/bootstrap/wire.h"

namespace ringcc {
namespace {

constexpr uint32_t kIdFormat = 0x52434231;  // "RCB1"
constexpr uint32_t kFlagCommId = 1;

struct IdLayout {
  uint32_t format;
  uint32_t flags;
  uint64_t magic;
  WireAddress root;
  int32_t growFrom;  // 0 except in grow ids
};
static_assert(sizeof(IdLayout) <= NCCL_UNIQUE_ID_BYTES);

}  // namespace

uint64_t commIdMagic(const std::optional<std::string>& secret) {
  if (!secret || secret->empty()) return kCommIdMagic;
  // FNV-1a over the bytes, then splitmix64's finalizer so that similar secrets give unrelated
  // magics. Not a cryptographic hash: the magic travels in the clear anyway (docs/launching.md).
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : *secret) h = (h ^ c) * 0x100000001b3ull;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h == 0 || h == kCommIdMagic ? h + 2 : h;
}

ncclResult_t bootstrapRandom64(uint64_t* out) {
  char* p = reinterpret_cast<char*>(out);
  size_t got = 0;
  while (got < sizeof(*out)) {
    ssize_t n = getrandom(p + got, sizeof(*out) - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;  // no getrandom: fall back
  }
  if (got == sizeof(*out)) return ncclSuccess;
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(ncclSystemError, "bootstrap", "no random source: %s", strerror(errno));
  got = 0;
  while (got < sizeof(*out)) {
    ssize_t n = ::read(fd, p + got, sizeof(*out) - got);
    if (n > 0)
      got += static_cast<size_t>(n);
    else if (!(n < 0 && errno == EINTR))
      break;
  }
  ::close(fd);
  if (got != sizeof(*out))
    return fail(ncclSystemError, "bootstrap", "short read from /dev/urandom");
  return ncclSuccess;
}

void bootstrapMakeId(const BootstrapId& fields, ncclUniqueId* id) {
  std::memset(id, 0, sizeof(*id));
  IdLayout l{kIdFormat, fields.fromCommId ? kFlagCommId : 0, fields.magic, fields.root.toWire(),
             fields.growFrom};
  std::memcpy(id->internal, &l, sizeof(l));
}

ncclResult_t bootstrapParseId(const ncclUniqueId& id, BootstrapId* out) {
  IdLayout l;
  std::memcpy(&l, id.internal, sizeof(l));
  if (l.format != kIdFormat)
    return fail(ncclInvalidArgument, "bootstrap",
                "unique id was not made by ncclGetUniqueId (format 0x%08x)", l.format);
  BootstrapId f;
  if (!SocketAddress::fromWire(l.root, &f.root))
    return fail(ncclInvalidArgument, "bootstrap", "unique id holds a malformed root address");
  f.magic = l.magic;
  f.fromCommId = (l.flags & kFlagCommId) != 0;
  if (l.growFrom < 0 || l.growFrom >= wire::kMaxRanks)
    return fail(ncclInvalidArgument, "bootstrap", "unique id names a grow of %d ranks", l.growFrom);
  f.growFrom = l.growFrom;
  *out = f;
  return ncclSuccess;
}

namespace {

ncclResult_t newRoot(int growFrom, ncclUniqueId* id) {
  BootstrapId f;
  f.growFrom = growFrom;
  do {
    RINGCC_CHECK(bootstrapRandom64(&f.magic));
  } while (f.magic == 0 || f.magic == kCommIdMagic);
  NetInterface nif;
  RINGCC_CHECK(bootstrapInterface(&nif));
  Socket listener;
  RINGCC_CHECK(Socket::listen(nif.address, &listener));
  f.root = listener.localAddress();
  RINGCC_CHECK(startRoot(std::move(listener), f.magic, /*singleUse=*/growFrom > 0));
  bootstrapMakeId(f, id);
  return ncclSuccess;
}

}  // namespace

ncclResult_t bootstrapNewRoot(ncclUniqueId* id) { return newRoot(0, id); }

ncclResult_t bootstrapNewGrowRoot(int growFrom, ncclUniqueId* id) {
  if (growFrom < 1)
    return fail(ncclInvalidArgument, "bootstrap", "a grow id needs a communicator, not %d ranks",
                growFrom);
  return newRoot(growFrom, id);
}

ncclResult_t bootstrapGetUniqueId(ncclUniqueId* id) {
  if (id == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId", "uniqueId is NULL");
  std::optional<std::string> commId = paramEnv("COMM_ID");
  if (!commId || commId->empty()) return bootstrapNewRoot(id);
  LOG_INFO(kLogEnv | kLogBootstrap, "NCCL_COMM_ID set by environment to %s%s", commId->c_str(),
           paramEnv("COMM_SECRET") ? " (with RINGCC_COMM_SECRET)"
                                   : "; without RINGCC_COMM_SECRET anyone who reaches the port "
                                     "can join");
  int family = parseSocketFamily(paramString("SOCKET_FAMILY"));
  BootstrapId f;
  RINGCC_CHECK(parseAddress(*commId, "NCCL_COMM_ID", family < 0 ? AF_UNSPEC : family, &f.root));
  f.magic = commIdMagic(paramEnv("COMM_SECRET"));
  f.fromCommId = true;
  bootstrapMakeId(f, id);
  return ncclSuccess;
}

}  // namespace ringcc
