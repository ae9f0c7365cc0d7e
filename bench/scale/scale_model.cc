// scale_model: the tuner's cost model (src/tune/cost_model.h) extrapolated to many GPUs. For
// 8 .. 65,536 ranks (R per host, N hosts) it prints, per message size, the all-reduce time and
// bus bandwidth of the ring and of the double binary tree, and which the tuner would pick; with
// --csv it also writes them for bench/scale/plot_scale.py. docs/scale.md explains the figures.
//
//   scale_model                          DGX-H100-like figures, 8 ranks per host, Simple
//   scale_model --figures host --ranks 2,4,8 --per-host 8 --sizes 8,1K,1M,64M
//                                        this project's host (what docs/scale.md validates)
//   scale_model --csv out.csv            also write every row
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "src/tune/cost_model.h"
#include "src/tune/tune.h"

using namespace ringcc;

namespace {

// A DGX H100-like box (docs/scale.md, "Figures"): 8 GPUs on NVLink4 through NVSwitch, 450 GB/s
// per GPU and direction; 8 x 400 Gb/s NICs, 50 GB/s each, 400 GB/s per box and direction.
// Latencies are NCCL's own Simple-protocol ring figures (src/tune/cost_model.h: NVLink 3.4 us
// and network 14 us per hop, 8.4 us base).
LinkFigures dgxFigures(int hosts, int perHost) {
  LinkFigures f;
  f.nHosts = hosts;
  f.ranksPerHost = perHost;
  f.intra = LinkClass{kNvlinkHopUs, 450.0 / 16, 450.0};
  f.inter = LinkClass{kNetHopUs, 50.0 / 2, 400.0};
  f.callUs = kDeviceCallUs;
  f.channelUs = 0.0;  // channels run on their own SMs: no cost to add one
  f.protocols = deviceProtoFactors();
  return f;
}

LinkFigures hostFigures(int hosts, int perHost) {
  LinkFigures f;
  f.nHosts = hosts;
  f.ranksPerHost = perHost;
  f.intra = hostShmLink();
  f.inter = hostUcxLink();
  return f;
}

double parseSize(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  switch (end && *end ? *end : ' ') {
    case 'K':
      return v * 1024;
    case 'M':
      return v * 1024 * 1024;
    case 'G':
      return v * 1024 * 1024 * 1024;
    default:
      return v;
  }
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    size_t comma = s.find(',', at);
    if (comma == std::string::npos) comma = s.size();
    if (comma > at) out.push_back(s.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

std::string sizeText(double b) {
  char t[32];
  if (b >= 1 << 30)
    std::snprintf(t, sizeof t, "%gG", b / (1 << 30));
  else if (b >= 1 << 20)
    std::snprintf(t, sizeof t, "%gM", b / (1 << 20));
  else if (b >= 1 << 10)
    std::snprintf(t, sizeof t, "%gK", b / (1 << 10));
  else
    std::snprintf(t, sizeof t, "%g", b);
  return t;
}

int usage() {
  std::fprintf(stderr,
               "usage: scale_model [--figures dgx|host] [--ranks N,N,...] [--per-host R]\n"
               "                   [--sizes S,S,...] [--protocols Simple,LL,Direct]\n"
               "                   [--algos Ring,Tree,Doubling]\n"
               "                   [--channels C] [--csv FILE]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string figures = "dgx", csvPath, protos, algos;
  std::vector<int> ranks;
  for (int n = 8; n <= 65536; n *= 2) ranks.push_back(n);
  std::vector<double> sizes = {8, 64 * 1024, 1 << 20, 16 << 20, 256 << 20, 4.0 * (1 << 30)};
  int perHost = 8, channels = 0;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    std::string v = argv[++i];
    if (a == "--figures") {
      figures = v;
    } else if (a == "--ranks") {
      ranks.clear();
      for (auto& s : split(v)) ranks.push_back(std::atoi(s.c_str()));
    } else if (a == "--per-host") {
      perHost = std::atoi(v.c_str());
    } else if (a == "--sizes") {
      sizes.clear();
      for (auto& s : split(v)) sizes.push_back(parseSize(s));
    } else if (a == "--protocols") {
      protos = v;
    } else if (a == "--algos") {
      algos = v;
    } else if (a == "--channels") {
      channels = std::atoi(v.c_str());
    } else if (a == "--csv") {
      csvPath = v;
    } else {
      return usage();
    }
  }
  if ((figures != "dgx" && figures != "host") || perHost < 1) return usage();
  const bool dgx = figures == "dgx";
  TuneConfig config;
  // On GPUs the host's LL and Direct factors do not apply: the DGX figures are Simple only.
  std::string unknown;
  config.protocols = parseProtocols(protos.empty() ? (dgx ? "Simple" : "") : protos, &unknown);
  // Doubling is ringcc's host algorithm; the DGX table compares NCCL's two.
  config.algos = dgx ? algoBit(Algo::Ring) | algoBit(Algo::Tree) : kAllAlgos;
  if (!algos.empty()) config.algos = parseAlgos(algos, &unknown);
  config.minChannels = config.maxChannels = channels > 0 ? channels : dgx ? 16 : 1;

  FILE* csv = csvPath.empty() ? nullptr : std::fopen(csvPath.c_str(), "w");
  if (!csvPath.empty() && !csv) {
    std::perror(csvPath.c_str());
    return 1;
  }
  if (csv)
    std::fprintf(csv,
                 "figures,ranks,hosts,per_host,bytes,ring_us,ring_busbw,tree_us,tree_busbw,"
                 "choice,choice_us\n");
  std::printf(
      "# scale_model: all-reduce, %s figures, %d ranks per host, protocols %s, %d channels\n",
      figures.c_str(), perHost, protos.empty() ? (dgx ? "Simple" : "all") : protos.c_str(),
      config.minChannels);
  std::printf("# busbw = S / t x 2(n-1)/n (GB/s), as nccl-tests\n");
  std::printf("%8s %6s %8s | %12s %9s | %12s %9s | %-16s\n", "ranks", "hosts", "size", "ring us",
              "busbw", "tree us", "busbw", "tuner picks");
  for (int n : ranks) {
    if (n < 1) return usage();
    const int per = std::min(perHost, n);
    const int hosts = (n + per - 1) / per;
    const LinkFigures links = dgx ? dgxFigures(hosts, per) : hostFigures(hosts, per);
    for (double bytes : sizes) {
      const double factor = n > 1 ? 2.0 * (n - 1) / n : 1.0;
      auto best = [&](Algo algo) {
        double t = INFINITY;
        for (int p = 0; p < kNumProtocols; p++)
          if (config.protocols & (1u << p))
            t = std::min(t, estimateMicros(links, Coll::AllReduce, bytes, n,
                                           {algo, static_cast<Protocol>(p), config.minChannels}));
        return t;
      };
      const double ring = best(Algo::Ring), tree = best(Algo::Tree);
      const TuneChoice pick =
          chooseTune(config, links, Coll::AllReduce, static_cast<uint64_t>(bytes), n);
      auto busbw = [&](double us) { return std::isinf(us) ? 0.0 : bytes / us / 1e3 * factor; };
      char choice[32];
      std::snprintf(choice, sizeof choice, "%s/%s", algoName(pick.algo),
                    protocolName(pick.protocol));
      std::printf("%8d %6d %8s | %12.1f %9.2f | %12.1f %9.2f | %-16s\n", n, hosts,
                  sizeText(bytes).c_str(), ring, busbw(ring), tree, busbw(tree), choice);
      if (csv)
        std::fprintf(csv, "%s,%d,%d,%d,%.0f,%.3f,%.4f,%.3f,%.4f,%s,%.3f\n", figures.c_str(), n,
                     hosts, per, bytes, ring, busbw(ring), tree, busbw(tree), choice, pick.micros);
    }
  }
  if (csv) std::fclose(csv);
  return 0;
}
