#include "bench/perf/perf_options.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "bench/perf/datatypes.h"

namespace ringcc::bench {
namespace {

enum class Arg { None, Required };

struct Flag {
  char shortName;
  const char* longName;
  Arg arg;
};

const Flag kFlags[] = {
    {'t', "nthreads", Arg::Required},
    {'g', "ngpus", Arg::Required},
    {'b', "minbytes", Arg::Required},
    {'e', "maxbytes", Arg::Required},
    {'i', "stepbytes", Arg::Required},
    {'f', "stepfactor", Arg::Required},
    {'n', "iters", Arg::Required},
    {'m', "agg_iters", Arg::Required},
    {'w', "warmup_iters", Arg::Required},
    {'N', "run_cycles", Arg::Required},
    {'p', "parallel_init", Arg::Required},
    {'c', "check", Arg::Required},
    {'o', "op", Arg::Required},
    {'d', "datatype", Arg::Required},
    {'r', "root", Arg::Required},
    {'z', "blocking", Arg::Required},
    {'y', "stream_null", Arg::Required},
    {'T', "timeout", Arg::Required},
    {'C', "report_cputime", Arg::Required},
    {'a', "average", Arg::Required},
    {'J', "output_file", Arg::Required},
    {'h', "help", Arg::None},
    // GPU-only in nccl-tests: accepted and ignored.
    {'G', "cudagraph", Arg::Required},
    {'R', "local_register", Arg::Required},
    {'x', "cta_policy", Arg::Required},
    {'D', "device_implementation", Arg::Required},
    {'V', "device_cta_count", Arg::Required},
    {'M', "memory_report", Arg::Required},
    {'S', "report_timestamps", Arg::Required},
    {'u', "unalign", Arg::Required},
};

const Flag* findShort(char c) {
  for (const Flag& f : kFlags)
    if (f.shortName == c) return &f;
  return nullptr;
}

const Flag* findLong(std::string_view name) {
  for (const Flag& f : kFlags)
    if (name == f.longName) return &f;
  return nullptr;
}

// Whole-string integer in C notation (base 0 like strtol), within [lo, hi].
bool parseInt(const std::string& text, long lo, long hi, long& out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 0);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
  out = v;
  return true;
}

std::string describe(const Flag& f) { return std::string("-") + f.shortName + "/--" + f.longName; }

// Applies one flag; returns "" or an error line.
std::string apply(const Flag& f, const std::string& value, PerfOptions& o) {
  long v = 0;
  auto intIn = [&](long lo, long hi, int& dst) -> std::string {
    if (!parseInt(value, lo, hi, v))
      return "invalid value '" + value + "' for " + describe(f) + " (expected an integer in [" +
             std::to_string(lo) + ", " + std::to_string(hi) + "])";
    dst = static_cast<int>(v);
    return "";
  };
  auto sizeIn = [&](size_t& dst, const char* what) -> std::string {
    std::optional<size_t> s = parseSize(value);
    if (!s) return std::string("invalid size specified for '") + what + "': '" + value + "'";
    dst = *s;
    return "";
  };
  constexpr long kIntMax = std::numeric_limits<int>::max();
  switch (f.shortName) {
    case 't': return intIn(1, 1024, o.nThreads);
    case 'g': return intIn(1, 1024, o.nGpus);
    case 'b': return sizeIn(o.minBytes, "minbytes");
    case 'e': return sizeIn(o.maxBytes, "maxbytes");
    case 'i': return sizeIn(o.stepBytes, "stepbytes");
    case 'f': {
      int factor = 0;
      std::string err = intIn(0, kIntMax, factor);
      o.stepFactor = static_cast<size_t>(factor);
      return err;
    }
    case 'n': return intIn(1, kIntMax, o.iters);
    case 'm': return intIn(1, kIntMax, o.aggIters);
    case 'w': return intIn(0, kIntMax, o.warmupIters);
    case 'N': return intIn(0, kIntMax, o.runCycles);
    case 'p': return intIn(0, 1, o.parallelInit);
    case 'c': return intIn(0, kIntMax, o.check);
    case 'r': return intIn(-1, kIntMax, o.root);
    case 'z': return intIn(0, 2, o.blocking);
    case 'y': return intIn(0, 1, o.streamNull);
    case 'T': return intIn(0, kIntMax, o.timeoutSec);
    case 'C': return intIn(0, 1, o.reportCpuTime);
    case 'R':
      return intIn(0, 2, o.localRegister);  // 1, 2 alike: buffers from ncclMemAlloc
    case 'a': {
      int a = 0;
      std::string err = intIn(0, 3, a);
      o.average = static_cast<Average>(a);
      return err;
    }
    case 'o': {
      o.ops.clear();
      if (value == "all") {
        for (int i = 0; i < kNumOps; ++i) o.ops.push_back(i);
        return "";
      }
      std::optional<OpKind> op = opByName(value);
      if (!op) return "invalid op '" + value + "' for -o (sum, prod, max, min, avg, mulsum, all)";
      o.ops.push_back(static_cast<int>(*op));
      return "";
    }
    case 'd': {
      o.types.clear();
      if (value == "all") {
        for (const TypeInfo& t : allTypes()) o.types.push_back(t.type);
        return "";
      }
      const TypeInfo* t = typeByName(value);
      if (!t)
        return "invalid type '" + value +
               "' for -d (int8, uint8, int32, uint32, int64, uint64, half, float, double, "
               "bfloat16, f8e4m3, f8e5m2, all)";
      o.types.push_back(t->type);
      return "";
    }
    case 'J':
      if (value.empty()) return "empty file name for -J/--output_file";
      o.jsonFile = value;
      return "";
    default:  // GPU-only flags
      o.ignored.push_back(std::string("-") + f.shortName + " " + value);
      return "";
  }
}

}  // namespace

std::optional<size_t> parseSize(std::string_view text) {
  std::string s(text);
  size_t pos = 0;
  while (pos < s.size() && s[pos] == ' ') ++pos;
  if (pos == s.size() || s[pos] == '-' || s[pos] == '+') return std::nullopt;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(s.c_str() + pos, &end);
  if (end == s.c_str() + pos || errno != 0 || !(v >= 0)) return std::nullopt;
  const char* rest = end;
  while (*rest == ' ') ++rest;
  double unit = 1;
  if (*rest != '\0') {
    switch (*rest) {
      case 'K': case 'k': unit = 1024.0; break;
      case 'M': case 'm': unit = 1024.0 * 1024; break;
      case 'G': case 'g': unit = 1024.0 * 1024 * 1024; break;
      default: return std::nullopt;
    }
    if (rest[1] != '\0') return std::nullopt;
  }
  double bytes = v * unit;
  if (bytes >= 18446744073709551615.0) return std::nullopt;
  return static_cast<size_t>(bytes);
}

ParseResult parsePerfArgs(int argc, const char* const* argv, PerfOptions& opts) {
  ParseResult r;
  auto error = [&](std::string msg) {
    r.status = ParseStatus::Error;
    r.error = std::move(msg);
    return r;
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    const Flag* flag = nullptr;
    std::optional<std::string> value;
    if (arg.rfind("--", 0) == 0 && arg.size() > 2) {
      std::string name = arg.substr(2);
      size_t eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name.resize(eq);
      }
      flag = findLong(name);
      if (!flag) return error("unknown option '" + arg + "' (see -h)");
    } else if (arg.size() >= 2 && arg[0] == '-') {
      flag = findShort(arg[1]);
      if (!flag) return error("unknown option '" + arg + "' (see -h)");
      if (arg.size() > 2) value = arg.substr(2);
    } else {
      return error("unexpected argument '" + arg + "' (see -h)");
    }
    if (flag->arg == Arg::None) {
      if (value) return error("option " + describe(*flag) + " takes no value");
      r.status = ParseStatus::Help;
      return r;
    }
    if (!value) {
      if (i + 1 >= argc) return error("option " + describe(*flag) + " needs a value");
      value = argv[++i];
    }
    std::string err = apply(*flag, *value, opts);
    if (!err.empty()) return error(err);
  }
  if (opts.minBytes > opts.maxBytes)
    return error("invalid sizes for 'minbytes' and 'maxbytes': " + std::to_string(opts.minBytes) +
                 " > " + std::to_string(opts.maxBytes));
  if (opts.stepFactor <= 1 && opts.stepBytes == 0 && opts.minBytes < opts.maxBytes)
    return error("'stepbytes' must be > 0 when 'stepfactor' <= 1 and minbytes < maxbytes");
  return r;
}

std::string perfUsage(const char* program) {
  std::string p = program;
  return "USAGE: " + p +
         "\n"
         "\t[-t,--nthreads <num threads>] \n"
         "\t[-g,--ngpus <ranks per thread>] \n"
         "\t[-b,--minbytes <min size in bytes>] \n"
         "\t[-e,--maxbytes <max size in bytes>] \n"
         "\t[-i,--stepbytes <increment size>] \n"
         "\t[-f,--stepfactor <increment factor>] \n"
         "\t[-n,--iters <iteration count>] \n"
         "\t[-m,--agg_iters <aggregated iteration count>] \n"
         "\t[-w,--warmup_iters <warmup iteration count>] \n"
         "\t[-N,--run_cycles <cycle count> run & print each cycle (default: 1; 0=infinite)] \n"
         "\t[-p,--parallel_init <0/1>] \n"
         "\t[-c,--check <check iteration count>] \n"
         "\t[-o,--op <sum/prod/min/max/avg/mulsum/all>] \n"
         "\t[-d,--datatype <nccltype/all>] \n"
         "\t[-r,--root <root>] \n"
         "\t[-z,--blocking <0/1>] \n"
         "\t[-y,--stream_null <0/1>] \n"
         "\t[-T,--timeout <time in seconds>] \n"
         "\t[-C,--report_cputime <0/1>] \n"
         "\t[-a,--average <0/1/2/3> report average iteration time <0=RANK0/1=AVG/2=MIN/3=MAX>] \n"
         "\t[-J,--output_file <file> write results as JSON to this file (rank 0)] \n"
         "\t[-R,--local_register <0/1/2> 1, 2: host buffers from ncclMemAlloc] \n"
         "\t[-h,--help]\n"
         "Ranks: -t threads x -g communicators per thread in each process; more processes come\n"
         "from ringcc-run (RINGCC_RANK, RINGCC_NRANKS, RINGCC_UNIQUE_ID) or mpirun.\n";
}

std::vector<size_t> sizeSweep(size_t minBytes, size_t maxBytes, size_t stepBytes,
                              size_t stepFactor) {
  std::vector<size_t> sizes;
  if (minBytes > maxBytes) return sizes;
  constexpr size_t kMax = std::numeric_limits<size_t>::max();
  size_t size = minBytes;
  while (true) {
    sizes.push_back(size);
    size_t next;
    if (stepFactor > 1) {
      if (size == 0) next = 1;
      else if (size > kMax / stepFactor) break;
      else next = size * stepFactor;
    } else {
      if (stepBytes == 0 || size > kMax - stepBytes) break;
      next = size + stepBytes;
    }
    if (next > maxBytes) break;
    size = next;
  }
  return sizes;
}

}  // namespace ringcc::bench
