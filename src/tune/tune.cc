#include "src/tune/tune.h"

#include <algorithm>
#include <cctype>
#include <limits>

#include "src/base/log.h"
#include "src/base/param.h"

namespace ringcc {
namespace {

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

namespace {

constexpr uint64_t kDoublingMaxBytes = 2048;

struct NamedBit {
  const char* name;  // lower case
  uint32_t bit;
};

// NCCL's list syntax: names separated by commas, case-insensitive, '^' first to exclude.
uint32_t parseList(const std::string& value, const NamedBit* names, size_t nNames, uint32_t all,
                   std::string* unknown) {
  unknown->clear();
  std::string v = trim(value);
  if (v.empty()) return all;
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
    const std::string l = lower(item);
    const NamedBit* hit = nullptr;
    for (size_t i = 0; i < nNames && !hit; i++)
      if (l == names[i].name) hit = &names[i];
    if (hit)
      named |= hit->bit;
    else
      appendItem(unknown, item);
  }
  uint32_t mask = exclude ? all & ~named : named;
  if (mask == 0) {
    appendItem(unknown, "(none left)");
    return all;
  }
  return mask;
}

std::string algoList(uint32_t mask) {
  std::string t;
  for (int a = 0; a < kNumAlgos; a++)
    if (mask & algoBit(static_cast<Algo>(a))) appendItem(&t, algoName(static_cast<Algo>(a)));
  return t;
}

}  // namespace

uint32_t parseProtocols(const std::string& value, std::string* unknown) {
  static const NamedBit kNames[] = {
      {"simple", 1u << kProtoSimple}, {"ll", 1u << kProtoLL}, {"direct", 1u << kProtoDirect}};
  uint32_t mask = parseList(value, kNames, 3, kAllProtocols, unknown);
  if (unknown->find("(none left)") != std::string::npos)
    unknown->replace(unknown->find("(none left)"), 11, "(no protocol left)");
  return mask;
}

uint32_t parseAlgos(const std::string& value, std::string* unknown) {
  static const NamedBit kNames[] = {{"ring", algoBit(Algo::Ring)},
                                    {"tree", algoBit(Algo::Tree)},
                                    {"doubling", algoBit(Algo::Doubling)}};
  uint32_t mask = parseList(value, kNames, 3, kAllAlgos, unknown);
  if (unknown->find("(none left)") != std::string::npos)
    unknown->replace(unknown->find("(none left)"), 11, "(no algorithm left)");
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
  // NCCL_ALGO: Ring and Tree as NCCL's, Doubling is ringcc's own (small all-reduces).
  std::string algo = paramString("ALGO");
  c.algos = parseAlgos(algo, &unknown);
  if (!unknown.empty())
    LOG_WARN(
        "environment: NCCL_ALGO=%s: %s not usable (valid: Ring, Tree, Doubling; CollNetDirect, "
        "CollNetChain, NVLS, NVLSTree and PAT are not provided by ringcc); allowed now: %s",
        algo.c_str(), unknown.c_str(), algoList(c.algos).c_str());
  int64_t chunk = paramInt("CHUNKSIZE");
  if (chunk < 0) {
    LOG_WARN("environment: NCCL_CHUNKSIZE=%lld is negative; using 0 (one slot per chunk)",
             static_cast<long long>(chunk));
    chunk = 0;
  }
  c.chunkBytes = static_cast<uint64_t>(chunk);
  return c;
}

TuneChoice chooseTune(const TuneConfig& config, const LinkFigures& links, Coll coll, uint64_t bytes,
                      int nranks) {
  TuneChoice best;
  best.micros = std::numeric_limits<double>::infinity();
  const int maxCh = nranks == 1 ? 1 : std::max(1, config.maxChannels);
  const int minCh = std::clamp(config.minChannels, 1, maxCh);
  uint32_t algos = config.algos;
  bool runnable = false, othersThanDoubling = false;
  for (int a = 0; a < kNumAlgos; a++) {
    const Algo algo = static_cast<Algo>(a);
    const bool ok = (algos & algoBit(algo)) && algoSupports(algo, coll, nranks);
    runnable |= ok;
    othersThanDoubling |= ok && algo != Algo::Doubling;
  }
  if (!runnable) {
    // As NCCL: an operation no allowed algorithm runs takes the ring.
    best.fallback = "no algorithm NCCL_ALGO allows runs it; using Ring";
    algos = algoBit(Algo::Ring);
  }
  static constexpr Protocol kProtos[] = {kProtoSimple, kProtoLL, kProtoDirect};
  for (int a = 0; a < kNumAlgos; a++) {
    const Algo algo = static_cast<Algo>(a);
    if (!(algos & algoBit(algo)) || !algoSupports(algo, coll, nranks)) continue;
    // Doubling is considered only where it was measured (docs/benchmarks.md): beyond it the
    // p2p connections' smaller slots, which the model does not see, make it lose. It also keeps
    // mid-size all-reduces on the ring connections, where a mismatched call (an all-gather on
    // the other rank) meets this rank's slots and is reported at once (docs/scale.md). Unless
    // NCCL_ALGO leaves nothing else.
    if (algo == Algo::Doubling && bytes > kDoublingMaxBytes && othersThanDoubling) continue;
    for (Protocol p : kProtos) {
      if (!(config.protocols & (1u << p))) continue;
      for (int ch = minCh; ch <= maxCh; ch++) {
        const double t =
            estimateMicros(links, coll, static_cast<double>(bytes), nranks, {algo, p, ch});
        if (t < best.micros) {
          best.micros = t;
          best.algo = algo;
          best.protocol = p;
          best.nChannels = ch;
        }
      }
    }
  }
  return best;
}

}  // namespace ringcc
