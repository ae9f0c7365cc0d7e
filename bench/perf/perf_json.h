// The -J results file, in nccl-tests' JSON layout (version 2): one function per part, in the
// order the run writes them. Only process 0 writes one (run.json set); every function here
// expects run.json non-null except closeJson.
//
//   { header: version, start_time, args, env, nccl_version, library   writeJsonHeader
//     config: { options..., devices: [...] }                          writeJsonConfig,
//     writeJsonDevices results: [ { size.. (row), out_of_place, in_place, ... }, ... ]
//     writeJsonRow*, writeJsonResult out_of_bounds, average_bus_bandwidth, errors writeJsonTotals
//     end_time }                                                      closeJson
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "bench/perf/perf_run.h"

namespace ringcc::bench::perf {

// Creates `wanted` exclusively (wanted.N if taken, like nccl-tests) and says so on `out`; null
// (with a "# skipping" line when it cannot be created) if no file could be made.
std::unique_ptr<JsonOut> openJson(const std::string& wanted, FILE* out);

void writeJsonHeader(Run& run, int argc, char** argv, int version);
// Opens "config" with the options; writeJsonDevices closes it.
void writeJsonConfig(Run& run);
// Every rank's device ("devices"), then closes "config".
void writeJsonDevices(Run& run);

// One row of "results": its size columns, one result per placement, then its end.
void writeJsonRowStart(Run& run, size_t bytes, size_t count, const char* type, const char* op,
                       int root);
void writeJsonResult(Run& run, bool inPlace, double timeUs, const Bandwidth& bw, bool reportErrors,
                     double wrong);
void writeJsonRowEnd(Run& run);

// Closes "results" and writes the summary: out-of-bounds count, average bus bandwidth against
// minBw (< 0: unchecked), the library's last error if any.
void writeJsonTotals(Run& run, int errors, double avgBw, double minBw, const char* lastError);

// Ends the document (with end_time if the run got past its header) and writes the file; no-op
// without -J. Returns `code`.
int closeJson(Run& run, int code);

}  // namespace ringcc::bench::perf
