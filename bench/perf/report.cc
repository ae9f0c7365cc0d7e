#include "bench/perf/report.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>

namespace ringcc::bench {
namespace {

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n < 0) return "";
  return std::string(buf, static_cast<size_t>(n) < sizeof(buf) ? n : sizeof(buf) - 1);
}

}  // namespace

std::string formatFloat(double value, int width) {
  if (!std::isfinite(value)) return format("%*s", width, std::isnan(value) ? "nan" : "inf");
  // Digits of the integer part (0 for values below 1).
  int power = 0;
  for (double val = 1; value >= val && power < 400; val *= 10) power++;
  if (power < width - 2) return format("%*.2f", width, value);
  if (power < width - 1) return format("%*.1f", width, value);
  if (power < width + 1) return format("%*.0f", width, value);
  if (width >= 7) return format("%*.1e", width, value);
  return format("%*.0e", width, value);
}

std::string tableHeader(const char* timeLabel) {
  std::string s = "#\n";
  s += format("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place"
              "          \n",
              "", "", "", "", "");
  s += format("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size",
              "count", "type", "redop", "root", timeLabel, "algbw", "busbw", "#wrong", timeLabel,
              "algbw", "busbw", "#wrong", 0, "");
  s += format("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)",
              "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
              "", 0, "");
  return s;
}

std::string rowPreamble(size_t bytes, size_t count, const char* type, const char* op, int root) {
  char rootName[32];
  std::snprintf(rootName, sizeof(rootName), "%6i", root);
  return format("%12zu  %12zu  %8s  %6s  %6s", bytes, count, type, op, rootName);
}

std::string rowResult(double timeUs, double algBw, double busBw, bool reportErrors,
                      int64_t wrong) {
  std::string t = formatFloat(timeUs, 7), a = formatFloat(algBw, 6), b = formatFloat(busBw, 6);
  if (reportErrors)
    return format("  %7s  %6s  %6s  %6g", t.c_str(), a.c_str(), b.c_str(),
                  static_cast<double>(wrong));
  return format("  %7s  %6s  %6s    N/A", t.c_str(), a.c_str(), b.c_str());
}

std::string footer(int errors, double avgBusBw, double minBw, const char* program) {
  std::string s;
  s += format("# %-20s : %d %s\n", "Out of bounds values", errors, errors ? "FAILED" : "OK");
  s += format("# %-20s : %g %s\n", "Avg bus bandwidth", avgBusBw,
              minBw < 0 ? "" : (avgBusBw < minBw * 0.9 ? "FAILED" : "OK"));
  s += "#\n";
  s += format("# Collective test concluded: %s\n", program);
  return s;
}

}  // namespace ringcc::bench
