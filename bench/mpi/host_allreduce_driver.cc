// The driver of bench/compare's reference all-reduces: see host_allreduce_driver.h. (The body
// of mpi_allreduce_bench before oneccl_allreduce_bench shared it; MPI_Allreduce became
// HostAllReduce::allReduce.)
#include "bench/mpi/host_allreduce_driver.h"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/perf/coll_spec.h"
#include "bench/perf/data_check.h"
#include "bench/perf/json_writer.h"
#include "bench/perf/perf_options.h"
#include "bench/perf/report.h"

namespace ringcc::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Bench {
  HostAllReduce* impl = nullptr;
  PerfOptions o;
  int rank = 0, nranks = 1;
  size_t maxBytes = 0;
  char* send = nullptr;
  char* recv = nullptr;
  char* expected = nullptr;
  JsonWriter json;
  bool writeJson = false;
  int errors = 0;
  double bwSum = 0;
  int bwCount = 0;
  int rep = 0;
};

void out(const Bench& b, const std::string& s) {
  if (b.rank != 0) return;
  std::fputs(s.c_str(), stdout);
  std::fflush(stdout);
}

void op(Bench& b, size_t count, ncclDataType_t type, OpKind opk, bool inPlace, int iter) {
  size_t bytes = count * typeInfo(type).size;
  size_t steps = bytes ? b.maxBytes / bytes : 1;
  if (steps == 0) steps = 1;
  size_t shift = bytes * (static_cast<size_t>(iter) % steps);
  const void* sp = inPlace ? static_cast<const void*>(b.recv + shift)
                           : static_cast<const void*>(b.send + shift);
  b.impl->allReduce(sp, b.recv + shift, count, type, opk);
}

double combineTime(const Bench& b, double sec) {
  double v = sec;
  switch (b.o.average) {
    case Average::Rank0: MPI_Bcast(&v, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD); return v;
    case Average::Min: MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD); return v;
    case Average::Max: MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD); return v;
    default:
      MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      return v / b.nranks;
  }
}

void initData(Bench& b, const CollCounts& c, ncclDataType_t type, OpKind opk, uint64_t seed,
              bool inPlace) {
  size_t elt = typeInfo(type).size;
  std::memset(b.recv, 0, c.recvCount * elt);
  CheckSetup s{CollKind::AllReduce, type, opk, -1, b.nranks, b.rank, seed, c};
  fillInput(s, inPlace ? b.recv : b.send);
  fillExpected(s, b.expected, b.recv);
}

void benchTime(Bench& b, size_t count, ncclDataType_t type, OpKind opk, bool inPlace) {
  const PerfOptions& o = b.o;
  CollCounts c = collCounts(CollKind::AllReduce, count, typeInfo(type).size, b.nranks);
  if (o.check) initData(b, c, type, opk, 99, inPlace);
  op(b, count, type, opk, inPlace, 0);
  MPI_Barrier(MPI_COMM_WORLD);
  auto start = Clock::now();
  for (int i = 0; i < o.iters; ++i)
    for (int a = 0; a < o.aggIters; ++a) op(b, count, type, opk, inPlace, i * o.aggIters + a);
  double sec = std::chrono::duration<double>(Clock::now() - start).count() /
               (static_cast<double>(o.iters) * o.aggIters);
  sec = combineTime(b, sec);
  Bandwidth bw = bandwidth(CollKind::AllReduce, count, typeInfo(type).size, sec, b.nranks);
  MPI_Barrier(MPI_COMM_WORLD);
  double wrong = 0;
  ++b.rep;
  for (int k = 0; k < o.check; ++k) {
    initData(b, c, type, opk, static_cast<uint64_t>(b.rep), inPlace);
    op(b, count, type, opk, inPlace, 0);
    CheckSetup s{CollKind::AllReduce, type, opk, -1, b.nranks, b.rank, 0, c};
    int64_t local = countWrong(type, b.recv, b.expected, c.recvCount, checkTolerance(s));
    if (local) b.errors++;
    wrong = static_cast<double>(local);
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (wrong != 0) {
      if (b.rank == 0)
        std::fprintf(stderr, "%s: WRONG RESULTS: %.0f wrong elements, %zu B %s %s %s\n",
                     b.impl->program(), wrong, count * typeInfo(type).size, typeInfo(type).name,
                     opName(opk), inPlace ? "in place" : "out of place");
      break;
    }
  }
  out(b, rowResult(sec * 1e6, bw.algBw, bw.busBw, o.check > 0, static_cast<int64_t>(wrong)));
  if (b.writeJson) {
    b.json.key(inPlace ? "in_place" : "out_of_place");
    b.json.beginObject();
    b.json.key("time");
    b.json.number(sec * 1e6);
    b.json.key("alg_bw");
    b.json.number(bw.algBw);
    b.json.key("bus_bw");
    b.json.number(bw.busBw);
    b.json.key("nwrong");
    if (o.check > 0) b.json.number(wrong);
    else b.json.null();
    b.json.endObject();
  }
  b.bwSum += bw.busBw;
  b.bwCount++;
}

}  // namespace

int runHostAllReduce(int argc, char** argv, HostAllReduce& impl) {
  Bench b;
  b.impl = &impl;
  const char* prog = impl.program();
  ParseResult parsed = parsePerfArgs(argc, argv, b.o);
  if (parsed.status == ParseStatus::Help) {
    std::fputs(perfUsage(prog).c_str(), stdout);
    return 0;
  }
  if (parsed.status == ParseStatus::Error) {
    std::fprintf(stderr, "%s: %s\n", prog, parsed.error.c_str());
    return 255;
  }
  const PerfOptions& o = b.o;
  if (o.nThreads != 1 || o.nGpus != 1) {
    std::fprintf(stderr, "%s: one rank per MPI process: -t and -g must be 1\n", prog);
    return 6;
  }
  std::vector<ncclDataType_t> types = o.types.empty() ? std::vector<ncclDataType_t>{ncclFloat32}
                                                      : o.types;
  std::vector<int> ops = o.ops.empty() ? std::vector<int>{0} : o.ops;
  for (ncclDataType_t t : types)
    if (!impl.hasType(t)) {
      std::fprintf(stderr, "%s: %s has no type for %s\n", prog, impl.libraryShort(),
                   typeInfo(t).name);
      return 5;
    }
  for (int v : ops)
    if (!impl.hasOp(static_cast<OpKind>(v))) {
      std::fprintf(stderr, "%s: %s has no operator %s\n", prog, impl.libraryShort(),
                   opName(static_cast<OpKind>(v)));
      return 5;
    }

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &b.nranks);
  impl.init(b.rank, b.nranks);
  b.maxBytes = o.maxBytes;
  b.send = static_cast<char*>(std::aligned_alloc(4096, (b.maxBytes / 4096 + 1) * 4096));
  b.recv = static_cast<char*>(std::aligned_alloc(4096, (b.maxBytes / 4096 + 1) * 4096));
  b.expected = static_cast<char*>(std::aligned_alloc(4096, (b.maxBytes / 4096 + 1) * 4096));
  b.writeJson = b.rank == 0 && !o.jsonFile.empty();

  std::string libName = impl.libraryName();
  out(b, "# " + std::string(prog) + " (" + impl.banner() + ")\n");
  out(b, "# Collective test starting: " + std::string(prog) + "\n");
  char line[512];
  std::snprintf(line, sizeof(line),
                "# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d "
                "iters: %d agg iters: %d validation: %d graph: 0 unalign: 0\n#\n# Ranks: %d MPI "
                "processes\n",
                o.minBytes, o.maxBytes, o.stepFactor > 1 ? o.stepFactor : o.stepBytes,
                o.stepFactor > 1 ? "factor" : "bytes", o.warmupIters, o.iters, o.aggIters,
                o.check, b.nranks);
  out(b, line);
  out(b, tableHeader("time"));
  if (b.writeJson) {
    b.json.beginObject();
    b.json.key("version");
    b.json.integer(2);
    b.json.key("library");
    b.json.str(libName);
    b.json.key("config");
    b.json.beginObject();
    b.json.key("nranks");
    b.json.integer(b.nranks);
    b.json.key("iterations");
    b.json.integer(o.iters);
    b.json.key("warmup_iters");
    b.json.integer(o.warmupIters);
    b.json.endObject();
    b.json.key("results");
    b.json.beginList();
  }

  for (ncclDataType_t type : types)
    for (int opv : ops) {
      OpKind opk = static_cast<OpKind>(opv);
      size_t elt = typeInfo(type).size;
      for (size_t size : sizeSweep(o.minBytes, b.maxBytes, 0, 2))
        for (int w = 0; w < o.warmupIters; ++w) op(b, size / elt, type, opk, false, w);
      for (size_t size : sizeSweep(o.minBytes, b.maxBytes, o.stepBytes, o.stepFactor)) {
        size_t count = size / elt;
        out(b, rowPreamble(count * elt, count, typeInfo(type).name, opName(opk), -1));
        if (b.writeJson) {
          b.json.beginObject();
          b.json.key("size");
          b.json.integer(static_cast<int64_t>(count * elt));
          b.json.key("count");
          b.json.integer(static_cast<int64_t>(count));
          b.json.key("type");
          b.json.str(typeInfo(type).name);
          b.json.key("redop");
          b.json.str(opName(opk));
          b.json.key("root");
          b.json.integer(-1);
        }
        benchTime(b, count, type, opk, false);
        benchTime(b, count, type, opk, true);
        out(b, "\n");
        if (b.writeJson) b.json.endObject();
      }
    }

  double errs = b.errors;
  MPI_Allreduce(MPI_IN_PLACE, &errs, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  double avgBw = b.bwCount ? b.bwSum / b.bwCount : 0;
  out(b, footer(static_cast<int>(errs), avgBw, -1, prog));
  out(b, "#\n\n");
  if (b.writeJson) {
    b.json.endList();
    b.json.key("out_of_bounds");
    b.json.beginObject();
    b.json.key("count");
    b.json.integer(static_cast<int64_t>(errs));
    b.json.endObject();
    b.json.key("average_bus_bandwidth");
    b.json.beginObject();
    b.json.key("bandwidth");
    b.json.number(avgBw);
    b.json.endObject();
    b.json.closeAll();
    if (FILE* f = std::fopen(o.jsonFile.c_str(), "w")) {
      std::fputs(b.json.text().c_str(), f);
      std::fclose(f);
    } else {
      std::fprintf(stderr, "%s: cannot write %s\n", prog, o.jsonFile.c_str());
    }
  }
  std::free(b.send);
  std::free(b.recv);
  std::free(b.expected);
  impl.finalize();
  MPI_Finalize();
  return errs != 0 ? 7 : 0;
}

}  // namespace ringcc::bench
