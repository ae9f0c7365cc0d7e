#include "src/base/param.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "src/base/log.h"

namespace ringcc {
namespace {

// Keep sorted by name; docs/env.md mirrors this table.
constexpr ParamDef kParams[] = {
    {"ALGO", "",
     "Algorithms the tuner may choose from, NCCL's list syntax (`Ring,Tree`, `^Tree`): Ring, "
     "Tree (all-reduce over the double binary tree) and Doubling (ringcc's recursive doubling, "
     "small all-reduces of a power of two ranks). Default: all, the cheapest by the cost model "
     "(`docs/scale.md`). NCCL's CollNetDirect, CollNetChain, NVLS, NVLSTree and PAT are not "
     "provided (WARN). A collective no allowed algorithm runs (anything but all-reduce under "
     "`Tree`) uses Ring, with a WARN."},
    {"BOOTSTRAP_TIMEOUT", "30000",
     "Milliseconds a bootstrap connect or read may take; also how far apart ranks may arrive.",
     ParamKind::Int},
    {"BUFFSIZE", "1048576",
     "Bytes of slot memory per ring connection and channel, cut into 8 slots (p2p connections "
     "get a quarter). 1 MiB (128 KiB slots) measured fastest on the host from 1 MiB messages "
     "up; communicators that use the network default to NCCL's 4 MiB (512 KiB messages).",
     ParamKind::Int},
    {"CHUNKSIZE", "0",
     "Bytes a ring step moves per loop, in whole slots below the slot count; 0: one slot.",
     ParamKind::Int},
    {"COMM_ID", "", "host:port of the bootstrap root, instead of the address in the unique id."},
    {"COMM_SECRET", "",
     "ringcc: a shared secret for jobs launched with NCCL_COMM_ID (the same on every rank); "
     "bootstrap connections without it are refused. Unset: a fixed, public magic."},
    {"DEBUG", "", "Log level: VERSION, WARN, INFO or TRACE."},
    {"DEBUG_FILE", "", "Log file instead of stderr; %h is the host name, %p the pid."},
    {"DEBUG_SUBSYS", "INIT,ENV", "Subsystems logged at INFO (comma list, ^ to exclude, ALL)."},
    {"DEVICE", "",
     "Memory kind of new communicators: host or cuda. Default: cuda when the process has "
     "loaded the CUDA driver and the initializing thread has a current context, host "
     "otherwise."},
    {"HOSTID", "",
     "Host identity: ranks whose HOSTID is equal share a host (shm between them), others use "
     "the network. Default: the host name and the kernel's boot id."},
    {"IB_DISABLE", "0",
     "1: keep UCX off InfiniBand (removes its rc, ud and dc transports unless UCX_TLS is set).",
     ParamKind::Int},
    {"MAX_NCHANNELS", "4", "Most channels a collective may use.", ParamKind::Int},
    {"MIN_NCHANNELS", "1", "Fewest channels a collective may use.", ParamKind::Int},
    {"NET", "",
     "ucx: every pair of ranks uses the network transport, even within one host or process "
     "(for tests); unset: only ranks on different hosts do."},
    {"NTHREADS", "0",
     "Reserved for the CUDA executor (threads per block); host communicators do not read it.",
     ParamKind::Int},
    {"P2P_DISABLE", "0",
     "1: never use the p2p transport (ranks in one process use shm), nor GPU memory shared "
     "between processes (CUDA IPC: shm slots stay in host memory).",
     ParamKind::Int},
    {"PROTO", "",
     "Protocols allowed: Simple, LL, Direct (comma list, ^ to exclude); default: LL up to 256 B "
     "per rank, Direct above (Simple where references cannot be read). Unknown names get a WARN "
     "naming the valid ones."},
    {"RMA_UCX", "1",
     "One-sided calls (ncclPutSignal, ncclSignal) to peers reached by the network: 1, by UCX's "
     "RMA and atomics where UCX has lanes for both (InfiniBand, RoCE), else as bootstrap "
     "messages (over TCP UCX emulates them, slower than the messages); 2, by UCX even where "
     "it emulates them; 0, always as messages (docs/rma.md).",
     ParamKind::Int},
    {"SHM_DISABLE", "0", "1: never use the shm transport (processes on one host use the network).",
     ParamKind::Int},
    {"SHM_MAP", "1",
     "0: under Direct, shm receivers no longer map the sender's ncclMemAlloc buffers to read "
     "large slices in place; they come through the segment.",
     ParamKind::Int},
    {"SHM_REFS", "0",
     "1: under Direct, shm receivers read large slices from the sender's memory "
     "(process_vm_readv) instead of through the segment; off by default (slower on the "
     "measured VM).",
     ParamKind::Int},
    {"SOCKET_FAMILY", "", "AF_INET or AF_INET6: address family of bootstrap sockets."},
    {"SOCKET_IFNAME", "", "Interfaces for bootstrap: prefix list, =exact, ^exclude."},
    {"SPIN_COUNT", "2000", "Polls of a connector before a waiting thread starts to sleep.",
     ParamKind::Int},
    {"TIMEOUT", "300000", "Milliseconds a collective may wait on a peer before it fails.",
     ParamKind::Int},
    {"TOPO_DUMP_FILE", "",
     "Rank 0 writes its host's topology there at init, in NCCL's topology XML."},
    {"TOPO_FILE", "",
     "NCCL topology XML to use instead of detection (ranks take its GPUs in order, or its CPUs "
     "if it has none)."},
    {"TRACE", "",
     "Directory for per-operation records (a JSON line per operation and rank); unset: off."},
};

}  // namespace

std::span<const ParamDef> paramTable() { return kParams; }

const ParamDef* findParam(const char* name) {
  for (const ParamDef& p : kParams)
    if (std::strcmp(p.name, name) == 0) return &p;
  return nullptr;
}

std::optional<std::string> paramEnv(const char* name) {
  for (const char* prefix : {"RINGCC_", "NCCL_"}) {
    std::string var = std::string(prefix) + name;
    if (const char* v = std::getenv(var.c_str())) return std::string(v);
  }
  return std::nullopt;
}

std::string paramString(const char* name) {
  if (auto v = paramEnv(name)) return *v;
  const ParamDef* def = findParam(name);
  return def ? def->defaultValue : "";
}

bool parseSize(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 0);
  if (errno != 0 || end == text.c_str()) return false;
  int64_t scale = 1;
  if (*end != '\0') {
    switch (*end) {
      case 'k':
      case 'K':
        scale = int64_t{1} << 10;
        break;
      case 'm':
      case 'M':
        scale = int64_t{1} << 20;
        break;
      case 'g':
      case 'G':
        scale = int64_t{1} << 30;
        break;
      default:
        return false;
    }
    if (end[1] != '\0') return false;
  }
  // A value whose scaled size does not fit 64 bits is malformed, not wrapped (found by
  // tests/fuzz/fuzz_env: "433333333333333M").
  if (__builtin_mul_overflow(static_cast<int64_t>(v), scale, out)) return false;
  return true;
}

int64_t paramInt(const char* name) {
  const ParamDef* def = findParam(name);
  int64_t fallback = 0;
  if (def && def->defaultValue[0]) parseSize(def->defaultValue, &fallback);
  auto v = paramEnv(name);
  if (!v) return fallback;
  int64_t parsed;
  if (!parseSize(*v, &parsed)) {
    LOG_WARN("environment: %s=%s is not a number; using %lld", name, v->c_str(),
             static_cast<long long>(fallback));
    return fallback;
  }
  return parsed;
}

}  // namespace ringcc
