// The lines the perf tools print around the results table (report.h prints the table's own
// header, rows and footer), as nccl-tests prints them: the "# ..." banner with the options,
// the ranks' devices, and after the table the footer and the library's last error. Process 0
// prints (print in perf_run.h).
#pragma once

#include <string>

#include "bench/perf/perf_run.h"

namespace ringcc::bench::perf {

// From "# ringcc perf tools ..." to the lone "#" before the devices.
void printBanner(Run& run, int version);
// "# Using devices" and every rank's line, gathered from every process; false (with *err) if
// the gather failed.
bool printDevices(Run& run, std::string* err);
// The footer (out-of-bounds count, average bus bandwidth), then "#" and the library's last
// error, if any (else an empty line).
void printFooter(Run& run, int errors, double avgBw, double minBw, const char* lastError);

}  // namespace ringcc::bench::perf
