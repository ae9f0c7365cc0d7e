#include "src/tune/tune.h"

#include <algorithm>
#include <cctype>

#include "src/core/log.h"
#include "src/core/param.h"

namespace ringcc {
namespace {

double hopsCost(const CostModel& model, int hops, double hopBytes) {
  return hops * (model.alphaMicros + hopBytes / model.bytesPerMicro);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

void appendItem(std::string* list, const std::string& item) {
  if (!list->empty()) *list += ",";
  *list += item;
}

// A channel-count parameter within [1, kMaxChannels], with a WARN when clamped.
int channelParam(const char* name) {
  constexpr int64_t kMaxChannels = 32;
  int64_t v = paramInt(name);
  int64_t c = std::clamp<int64_t>(v, 1, kMaxChannels);
  if (c != v)
    LOG_WARN("environment: NCCL_%s=%lld is outside 1..%lld; using %lld", name,
             static_cast<long long>(v), static_cast<long long>(kMaxChannels),
             static_cast<long long>(c));
  return static_cast<int>(c);
}

}  // namespace

const char* protocolName(Protocol p) {
  switch (p) {
    case kProtoLL:
      return "LL";
    case kProtoDirect:
      return "Direct";
    default:
      return "Simple";
  }
}

uint32_t parseProtocols(const std::string& value, std::string* unknown) {
  unknown->clear();
  std::string v = trim(value);
  if (v.empty()) return kAllProtocols;
  const bool exclude = v[0] == '^';
  if (exclude) v = v.substr(1);
  uint32_t named = 0;
  size_t at = 0;
  while (at <= v.size()) {
    size_t comma = v.find(',', at);
    if (comma == std::string::npos) comma = v.size();
    std::string item = trim(v.substr(at, comma - at));
    at = comma + 1;
    if (item.empty()) continue;
    std::string l = lower(item);
    if (l == "simple") {
      named |= 1u << kProtoSimple;
    } else if (l == "ll") {
      named |= 1u << kProtoLL;
    } else if (l == "direct") {
      named |= 1u << kProtoDirect;
    } else {
      appendItem(unknown, item);
    }
  }
  uint32_t mask = exclude ? kAllProtocols & ~named : named;
  if (mask == 0) {
    appendItem(unknown, "(no protocol left)");
    return kAllProtocols;
  }
  return mask;
}

TuneConfig tuneConfigFromEnv() {
  TuneConfig c;
  c.minChannels = channelParam("MIN_NCHANNELS");
  c.maxChannels = channelParam("MAX_NCHANNELS");
  if (c.minChannels > c.maxChannels) {
    LOG_WARN("environment: NCCL_MIN_NCHANNELS=%d exceeds NCCL_MAX_NCHANNELS=%d; using %d",
             c.minChannels, c.maxChannels, c.maxChannels);
    c.minChannels = c.maxChannels;
  }
  std::string proto = paramString("PROTO");
  std::string unknown;
  c.protocols = parseProtocols(proto, &unknown);
  if (!unknown.empty())
    LOG_WARN(
        "environment: NCCL_PROTO=%s: %s not usable (valid: Simple, LL, Direct; LL128 is not "
        "provided by ringcc); allowed now: %s%s%s",
        proto.c_str(), unknown.c_str(), c.protocols & (1u << kProtoSimple) ? "Simple " : "",
        c.protocols & (1u << kProtoLL) ? "LL " : "",
        c.protocols & (1u << kProtoDirect) ? "Direct" : "");
  // NCCL_ALGO names NCCL's algorithms; ringcc builds Ring (and its own Doubling for small
  // all-reduces, which "Ring" alone turns off). Tree and the others are not built yet.
  std::string algo = lower(trim(paramString("ALGO")));
  if (algo == "ring") {
    c.ringOnly = true;
  } else if (!algo.empty() && algo != "^tree" && algo != "doubling" && algo != "ring,doubling" &&
             algo != "doubling,ring") {
    LOG_WARN(
        "environment: NCCL_ALGO=%s: ringcc builds Ring and Doubling (valid: Ring, "
        "Doubling); Tree and the others are not built yet; using the default choice",
        paramString("ALGO").c_str());
  }
  int64_t chunk = paramInt("CHUNKSIZE");
  if (chunk < 0) {
    LOG_WARN("environment: NCCL_CHUNKSIZE=%lld is negative; using 0 (one slot per chunk)",
             static_cast<long long>(chunk));
    chunk = 0;
  }
  c.chunkBytes = static_cast<uint64_t>(chunk);
  return c;
}

TuneChoice chooseTune(const TuneConfig& config, Coll coll, uint64_t bytes, int nranks) {
  TuneChoice t;
  t.nChannels =
      nranks == 1 ? 1 : std::clamp(config.minChannels, 1, std::max(1, config.maxChannels));
  const bool llOk = (config.protocols & (1u << kProtoLL)) != 0;
  const bool simpleOk = (config.protocols & (1u << kProtoSimple)) != 0;
  const bool directOk = (config.protocols & (1u << kProtoDirect)) != 0;
  if (llOk && (bytes <= config.llMaxBytes || (!simpleOk && !directOk)))
    t.protocol = kProtoLL;
  else
    t.protocol = directOk ? kProtoDirect : kProtoSimple;
  const bool powerOfTwo = nranks >= 2 && (nranks & (nranks - 1)) == 0;
  t.algo =
      coll == Coll::AllReduce && powerOfTwo && !config.ringOnly && bytes <= config.doublingMaxBytes
          ? Algo::Doubling
          : Algo::Ring;
  return t;
}

double estimateCollMicros(const CostModel& model, Coll coll, double bytes, int nranks) {
  const int n = nranks;
  if (n == 1) return hopsCost(model, 1, bytes);
  switch (coll) {
    case Coll::AllReduce:
      return hopsCost(model, 2 * (n - 1), bytes / n);
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AllToAll:
      return hopsCost(model, n - 1, bytes);
    case Coll::Gather:
    case Coll::Scatter:
      return hopsCost(model, 1, bytes * (n - 1));
    case Coll::Send:
    case Coll::Recv:
      return hopsCost(model, 1, bytes);
    default:
      return hopsCost(model, n - 1, bytes);  // chains: broadcast, reduce
  }
}

}  // namespace ringcc
