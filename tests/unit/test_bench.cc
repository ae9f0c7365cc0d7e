// The benchmark tools' logic: flags, size sweep, bandwidth formulas, element codecs, the data
// check, the report text, the JSON writer, the launcher, and the driver end to end against an
// in-process stand-in for the library (bench_fake_comm).
#include <catch2/catch.hpp>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/launcher/launch_protocol.h"
#include "bench/launcher/launcher.h"
#include "bench/perf/coll_spec.h"
#include "bench/perf/data_check.h"
#include "bench/perf/datatypes.h"
#include "bench/perf/driver.h"
#include "bench/perf/json_writer.h"
#include "bench/perf/perf_options.h"
#include "bench/perf/process_group.h"
#include "bench/perf/report.h"
#include "bench/perf/thread_reducer.h"
#include "support/test_env.h"
#include "unit/bench_fake_comm.h"

using namespace ringcc::bench;
using ringcc::test::FakeCommKnobs;
using ringcc::test::ScopedEnv;

namespace {

ParseResult parse(std::vector<std::string> args, PerfOptions& o) {
  args.insert(args.begin(), "all_reduce_perf");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parsePerfArgs(static_cast<int>(argv.size()), argv.data(), o);
}

struct ToolRun {
  int code = -1;
  std::string out, err;
  // Data rows of the table, split into columns.
  std::vector<std::vector<std::string>> rows() const {
    std::vector<std::vector<std::string>> r;
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream cols(line);
      std::vector<std::string> c;
      std::string w;
      while (cols >> w) c.push_back(w);
      if (c.size() == 13) r.push_back(c);
    }
    return r;
  }
};

ToolRun runTool(CollKind kind, std::vector<std::string> args, const CommApi& api) {
  // Never let a test pick up a launcher's or MPI's variables.
  ScopedEnv n(kEnvNranks, std::nullopt), r(kEnvRank, std::nullopt), u(kEnvUniqueId, std::nullopt);
  args.insert(args.begin(), collSpec(kind).program);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  char *obuf = nullptr, *ebuf = nullptr;
  size_t olen = 0, elen = 0;
  FILE* o = open_memstream(&obuf, &olen);
  FILE* e = open_memstream(&ebuf, &elen);
  ToolRun t;
  t.code = runPerf(kind, static_cast<int>(args.size()), argv.data(), api, PerfIo{o, e});
  std::fclose(o);
  std::fclose(e);
  t.out.assign(obuf, olen);
  t.err.assign(ebuf, elen);
  std::free(obuf);
  std::free(ebuf);
  return t;
}

std::vector<unsigned char> encoded(ncclDataType_t type, double v) {
  std::vector<unsigned char> b(typeInfo(type).size);
  encodeValue(type, v, b.data());
  return b;
}

unsigned bits(ncclDataType_t type, double v) {
  std::vector<unsigned char> b = encoded(type, v);
  unsigned x = 0;
  std::memcpy(&x, b.data(), b.size());
  return x;
}

// Reduces every rank's input at each index in the given rank order, rounding to the element
// type after every step as a library would: the data check promises the result does not
// depend on the order.
std::vector<char> reduceInOrder(const CheckSetup& base, const std::vector<int>& order,
                                size_t offset, size_t count) {
  size_t elt = typeInfo(base.type).size;
  std::vector<char> out(count * elt);
  std::vector<char> tmp(elt);
  for (size_t i = 0; i < count; ++i) {
    double acc = 0;
    bool first = true;
    for (int r : order) {
      double v = inputValue(base, r, offset + i);
      if (base.op == OpKind::MulSum) v *= premulScalar(r);
      encodeValue(base.type, v, tmp.data());
      v = decodeValue(base.type, tmp.data());
      switch (base.op) {
        case OpKind::Prod: acc = first ? v : acc * v; break;
        case OpKind::Max: acc = first ? v : std::max(acc, v); break;
        case OpKind::Min: acc = first ? v : std::min(acc, v); break;
        default: acc = first ? v : acc + v; break;
      }
      encodeValue(base.type, acc, tmp.data());
      acc = decodeValue(base.type, tmp.data());
      first = false;
    }
    if (base.op == OpKind::Avg)
      acc = typeInfo(base.type).isFloat ? acc / base.nranks : std::trunc(acc / base.nranks);
    encodeValue(base.type, acc, out.data() + i * elt);
  }
  return out;
}

// Runs one collective over `nranks` fake communicators from this thread and checks every
// rank's output with the data check.
int64_t fakeCollectiveWrong(CollKind kind, ncclDataType_t type, OpKind op, int nranks, int root,
                            bool inPlace, size_t count, const FakeCommKnobs& knobs = {}) {
  CommApi api = ringcc::test::fakeCommApi(knobs);
  size_t elt = typeInfo(type).size;
  CollCounts c = collCounts(kind, count, elt, nranks);
  std::vector<ncclComm_t> comms(nranks);
  REQUIRE(api.commInitAll(comms.data(), nranks, nullptr) == ncclSuccess);
  std::vector<std::vector<char>> send(nranks), recv(nranks), expected(nranks);
  for (int r = 0; r < nranks; ++r) {
    send[r].assign(count * elt + 64, 0);
    recv[r].assign(count * elt + 64, 0);
    expected[r].assign(count * elt + 64, 0);
    CheckSetup s{kind, type, op, root, nranks, r, 7, c};
    char* input = inPlace ? recv[r].data() + c.sendInplaceOffset * r * elt : send[r].data();
    fillInput(s, input);
    char* region = inPlace ? recv[r].data() + c.recvInplaceOffset * r * elt : recv[r].data();
    fillExpected(s, expected[r].data(), region);
  }
  REQUIRE(api.groupStart() == ncclSuccess);
  for (int r = 0; r < nranks; ++r) {
    const void* sp = inPlace ? recv[r].data() + c.sendInplaceOffset * r * elt : send[r].data();
    void* rp = inPlace ? recv[r].data() + c.recvInplaceOffset * r * elt : recv[r].data();
    ncclRedOp_t redop = static_cast<ncclRedOp_t>(op == OpKind::MulSum ? 0 : static_cast<int>(op));
    if (op == OpKind::MulSum) {
      char scalar[16] = {};
      encodeValue(type, premulScalar(r), scalar);
      REQUIRE(api.redOpCreatePreMulSum(&redop, scalar, type, ncclScalarHostImmediate, comms[r]) ==
              ncclSuccess);
    }
    switch (kind) {
      case CollKind::AllReduce: api.allReduce(sp, rp, c.paramCount, type, redop, comms[r], nullptr); break;
      case CollKind::Reduce: api.reduce(sp, rp, c.paramCount, type, redop, root, comms[r], nullptr); break;
      case CollKind::ReduceScatter:
        api.reduceScatter(sp, rp, c.paramCount, type, redop, comms[r], nullptr);
        break;
      case CollKind::AllGather: api.allGather(sp, rp, c.paramCount, type, comms[r], nullptr); break;
      case CollKind::Broadcast: api.broadcast(sp, rp, c.paramCount, type, root, comms[r], nullptr); break;
      case CollKind::AlltoAll: api.alltoAll(sp, rp, c.paramCount, type, comms[r], nullptr); break;
      case CollKind::SendRecv:
        api.send(sp, c.paramCount, type, (r + 1) % nranks, comms[r], nullptr);
        api.recv(rp, c.paramCount, type, (r - 1 + nranks) % nranks, comms[r], nullptr);
        break;
    }
  }
  REQUIRE(api.groupEnd() == ncclSuccess);
  int64_t wrong = 0;
  for (int r = 0; r < nranks; ++r) {
    CheckSetup s{kind, type, op, root, nranks, r, 7, c};
    const char* region = inPlace ? recv[r].data() + c.recvInplaceOffset * r * elt : recv[r].data();
    wrong += countWrong(type, region, expected[r].data(), c.recvCount, checkTolerance(s));
  }
  for (ncclComm_t comm : comms) api.commDestroy(comm);
  return wrong;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

TEST_CASE("perf flags: nccl-tests defaults", "[bench_args]") {
  PerfOptions o;
  REQUIRE(parse({}, o).status == ParseStatus::Run);
  CHECK(o.nThreads == 1);
  CHECK(o.nGpus == 1);
  CHECK(o.minBytes == 32u << 20);
  CHECK(o.maxBytes == 32u << 20);
  CHECK(o.stepBytes == 1u << 20);
  CHECK(o.stepFactor == 1);
  CHECK(o.iters == 20);
  CHECK(o.warmupIters == 1);
  CHECK(o.aggIters == 1);
  CHECK(o.check == 1);
  CHECK(o.ops.empty());
  CHECK(o.types.empty());
  CHECK(o.root == 0);
  CHECK(o.blocking == 0);
  CHECK(o.timeoutSec == 0);
  CHECK(o.average == Average::Avg);
  CHECK(o.jsonFile.empty());
}

TEST_CASE("perf flags: every flag and its forms", "[bench_args]") {
  PerfOptions o;
  ParseResult r = parse({"-b", "8", "-e", "128M", "-f", "2", "-n", "5", "-w", "0", "-c", "0",
                         "-t", "2", "-g", "3", "-o", "max", "-d", "half", "-r", "1", "-z", "1",
                         "-T", "7", "-a", "3", "-m", "4", "-N", "2", "-C", "1", "-p", "1", "-J",
                         "out.json", "-y", "1", "-i", "4K"},
                        o);
  REQUIRE(r.status == ParseStatus::Run);
  CHECK(o.minBytes == 8);
  CHECK(o.maxBytes == 128u << 20);
  CHECK(o.stepFactor == 2);
  CHECK(o.stepBytes == 4096);
  CHECK(o.iters == 5);
  CHECK(o.warmupIters == 0);
  CHECK(o.check == 0);
  CHECK(o.nThreads == 2);
  CHECK(o.nGpus == 3);
  CHECK(o.ops == std::vector<int>{static_cast<int>(OpKind::Max)});
  CHECK(o.types == std::vector<ncclDataType_t>{ncclFloat16});
  CHECK(o.root == 1);
  CHECK(o.blocking == 1);
  CHECK(o.timeoutSec == 7);
  CHECK(o.average == Average::Max);
  CHECK(o.aggIters == 4);
  CHECK(o.runCycles == 2);
  CHECK(o.reportCpuTime == 1);
  CHECK(o.parallelInit == 1);
  CHECK(o.jsonFile == "out.json");
  CHECK(o.streamNull == 1);

  PerfOptions a, b, c;
  REQUIRE(parse({"-b8", "-e1K"}, a).status == ParseStatus::Run);
  REQUIRE(parse({"--minbytes=8", "--maxbytes", "1K"}, b).status == ParseStatus::Run);
  REQUIRE(parse({"--nthreads", "4", "--datatype=all", "--op", "all"}, c).status ==
          ParseStatus::Run);
  CHECK(a.minBytes == 8);
  CHECK(a.maxBytes == 1024);
  CHECK(b.minBytes == 8);
  CHECK(b.maxBytes == 1024);
  CHECK(c.nThreads == 4);
  CHECK(c.types.size() == 12);
  CHECK(c.ops.size() == 6);
  CHECK(c.types.front() == ncclInt8);
  CHECK(c.types.back() == ncclFloat8e5m2);
}

TEST_CASE("perf flags: sizes with K/M/G suffixes", "[bench_args]") {
  CHECK(parseSize("0") == size_t{0});
  CHECK(parseSize("8") == size_t{8});
  CHECK(parseSize("1K") == size_t{1024});
  CHECK(parseSize("1k") == size_t{1024});
  CHECK(parseSize("1.5K") == size_t{1536});
  CHECK(parseSize("2M") == size_t{2u << 20});
  CHECK(parseSize("256m") == size_t{256u << 20});
  CHECK(parseSize("1G") == size_t{1u << 30});
  CHECK(parseSize("4g") == size_t{4ull << 30});
  CHECK(parseSize("1 K") == size_t{1024});
  CHECK(parseSize("0x10") == size_t{16});
  CHECK_FALSE(parseSize(""));
  CHECK_FALSE(parseSize("K"));
  CHECK_FALSE(parseSize("-1"));
  CHECK_FALSE(parseSize("8B"));
  CHECK_FALSE(parseSize("1KB"));
  CHECK_FALSE(parseSize("1T"));
  CHECK_FALSE(parseSize("abc"));
  CHECK_FALSE(parseSize("1e30G"));
}

TEST_CASE("perf flags: errors name the flag", "[bench_args]") {
  auto error = [](std::vector<std::string> args) {
    PerfOptions o;
    ParseResult r = parse(std::move(args), o);
    CHECK(r.status == ParseStatus::Error);
    return r.error;
  };
  CHECK(error({"-b", "1M", "-e", "1K"}).find("invalid sizes for 'minbytes' and 'maxbytes'") !=
        std::string::npos);
  CHECK(error({"-b", "x"}).find("minbytes") != std::string::npos);
  CHECK(error({"-e", "-5"}).find("maxbytes") != std::string::npos);
  CHECK(error({"-t", "0"}).find("-t/--nthreads") != std::string::npos);
  CHECK(error({"-g", "two"}).find("-g/--ngpus") != std::string::npos);
  CHECK(error({"-n", "0"}).find("-n/--iters") != std::string::npos);
  CHECK(error({"-a", "4"}).find("-a/--average") != std::string::npos);
  CHECK(error({"-r", "-2"}).find("-r/--root") != std::string::npos);
  CHECK(error({"-o", "bogus"}).find("invalid op 'bogus'") != std::string::npos);
  CHECK(error({"-d", "float32"}).find("invalid type 'float32'") != std::string::npos);
  CHECK(error({"-b"}).find("needs a value") != std::string::npos);
  CHECK(error({"--bogus"}).find("unknown option '--bogus'") != std::string::npos);
  CHECK(error({"-q", "1"}).find("unknown option '-q'") != std::string::npos);
  CHECK(error({"stray"}).find("unexpected argument 'stray'") != std::string::npos);
  CHECK(error({"-b", "1", "-e", "2", "-i", "0"}).find("stepbytes") != std::string::npos);
  CHECK(error({"-J", ""}).find("-J") != std::string::npos);
  CHECK(error({"--help=1"}).find("takes no value") != std::string::npos);

  PerfOptions o;
  CHECK(parse({"-h"}, o).status == ParseStatus::Help);
  CHECK(parse({"-b", "1", "--help"}, o).status == ParseStatus::Help);
  PerfOptions same;
  CHECK(parse({"-b", "1K", "-e", "1K", "-i", "0"}, same).status == ParseStatus::Run);
  PerfOptions gpu;
  REQUIRE(parse({"-G", "1", "-R", "2", "--memory_report=1"}, gpu).status == ParseStatus::Run);
  CHECK(gpu.ignored == std::vector<std::string>{"-G 1", "-M 1"});
  CHECK(gpu.localRegister == 2);  // buffers from ncclMemAlloc, as with -R 1
  PerfOptions reg;
  CHECK(parse({"-R", "3"}, reg).status == ParseStatus::Error);
  CHECK(perfUsage("x").find("-J,--output_file") != std::string::npos);
}

TEST_CASE("size sweep: factors, steps and edges", "[bench_sweep]") {
  CHECK(sizeSweep(8, 1024, 0, 2) ==
        std::vector<size_t>{8, 16, 32, 64, 128, 256, 512, 1024});
  CHECK(sizeSweep(8, 1000, 0, 2) == std::vector<size_t>{8, 16, 32, 64, 128, 256, 512});
  CHECK(sizeSweep(3, 100, 0, 3) == std::vector<size_t>{3, 9, 27, 81});
  CHECK(sizeSweep(10, 40, 10, 1) == std::vector<size_t>{10, 20, 30, 40});
  CHECK(sizeSweep(10, 45, 10, 0) == std::vector<size_t>{10, 20, 30, 40});
  CHECK(sizeSweep(100, 100, 0, 1) == std::vector<size_t>{100});
  CHECK(sizeSweep(100, 100, 7, 4) == std::vector<size_t>{100});
  CHECK(sizeSweep(0, 8, 0, 2) == std::vector<size_t>{0, 1, 2, 4, 8});
  CHECK(sizeSweep(0, 0, 1, 1) == std::vector<size_t>{0});
  CHECK(sizeSweep(5, 3, 1, 1).empty());
  CHECK(sizeSweep(32u << 20, 32u << 20, 1u << 20, 1) == std::vector<size_t>{32u << 20});
  // The default nccl-tests sweep from 8 B to 128 MiB by 2: 25 sizes.
  std::vector<size_t> s = sizeSweep(8, 128u << 20, 0, 2);
  CHECK(s.size() == 25);
  CHECK(s.back() == 128u << 20);
  // No overflow at the top of size_t.
  constexpr size_t kMax = std::numeric_limits<size_t>::max();
  std::vector<size_t> big = sizeSweep(1, kMax, 0, 2);
  CHECK(big.size() == 64);
  CHECK(big.back() == size_t{1} << 63);
  std::vector<size_t> stepped = sizeSweep(kMax - 5, kMax, 4, 1);
  CHECK(stepped == std::vector<size_t>{kMax - 5, kMax - 1});
}

TEST_CASE("collective byte counts and in-place offsets", "[bench_math]") {
  CollCounts ar = collCounts(CollKind::AllReduce, 1000, 4, 3);
  CHECK(ar.sendCount == 1000);
  CHECK(ar.recvCount == 1000);
  CHECK(ar.paramCount == 1000);
  CHECK(ar.sendInplaceOffset == 0);
  CHECK(ar.recvInplaceOffset == 0);

  // Split collectives round each rank's share down to whole 16-byte groups.
  CollCounts ag = collCounts(CollKind::AllGather, 1000, 4, 3);  // 333 -> 332 floats
  CHECK(ag.sendCount == 332);
  CHECK(ag.recvCount == 996);
  CHECK(ag.paramCount == 332);
  CHECK(ag.sendInplaceOffset == 332);
  CHECK(ag.recvInplaceOffset == 0);
  CollCounts rs = collCounts(CollKind::ReduceScatter, 1000, 4, 3);
  CHECK(rs.sendCount == 996);
  CHECK(rs.recvCount == 332);
  CHECK(rs.paramCount == 332);
  CHECK(rs.sendInplaceOffset == 0);
  CHECK(rs.recvInplaceOffset == 332);
  CollCounts aa = collCounts(CollKind::AlltoAll, 1000, 4, 3);
  CHECK(aa.paramCount == 332);
  CHECK(aa.sendCount == 996);
  CHECK(aa.recvCount == 996);
  CHECK(collCounts(CollKind::AllGather, 1000, 1, 3).paramCount == 320);  // 333 -> 320 bytes
  CHECK(collCounts(CollKind::AllGather, 1000, 8, 3).paramCount == 332);  // 333 -> 332 doubles
  CHECK(collCounts(CollKind::AllGather, 2, 4, 4).paramCount == 0);       // 8 B over 4 ranks
  CHECK(collCounts(CollKind::Broadcast, 7, 2, 5).recvCount == 7);
  CHECK(collCounts(CollKind::SendRecv, 7, 2, 5).sendCount == 7);
}

TEST_CASE("bus bandwidth factors and arithmetic per collective", "[bench_math]") {
  CHECK(busBwFactor(CollKind::AllReduce, 4) == Approx(1.5));
  CHECK(busBwFactor(CollKind::AllReduce, 2) == Approx(1.0));
  CHECK(busBwFactor(CollKind::AllReduce, 1) == Approx(0.0));
  CHECK(busBwFactor(CollKind::AllReduce, 8) == Approx(1.75));
  CHECK(busBwFactor(CollKind::AllGather, 4) == Approx(0.75));
  CHECK(busBwFactor(CollKind::ReduceScatter, 4) == Approx(0.75));
  CHECK(busBwFactor(CollKind::AlltoAll, 4) == Approx(0.75));
  CHECK(busBwFactor(CollKind::Broadcast, 4) == Approx(1.0));
  CHECK(busBwFactor(CollKind::Reduce, 4) == Approx(1.0));
  CHECK(busBwFactor(CollKind::SendRecv, 4) == Approx(1.0));

  // 1e6 floats in 1 ms on 4 ranks.
  Bandwidth ar = bandwidth(CollKind::AllReduce, 1000000, 4, 1e-3, 4);
  CHECK(ar.algBw == Approx(4.0));
  CHECK(ar.busBw == Approx(6.0));
  // Split collectives count all ranks' shares: 4 x 1e6 floats.
  Bandwidth ag = bandwidth(CollKind::AllGather, 1000000, 4, 1e-3, 4);
  CHECK(ag.algBw == Approx(16.0));
  CHECK(ag.busBw == Approx(12.0));
  Bandwidth rs = bandwidth(CollKind::ReduceScatter, 1000000, 4, 1e-3, 4);
  CHECK(rs.algBw == Approx(16.0));
  CHECK(rs.busBw == Approx(12.0));
  Bandwidth aa = bandwidth(CollKind::AlltoAll, 1000000, 4, 1e-3, 4);
  CHECK(aa.algBw == Approx(16.0));
  CHECK(aa.busBw == Approx(12.0));
  for (CollKind k : {CollKind::Broadcast, CollKind::Reduce, CollKind::SendRecv}) {
    Bandwidth b = bandwidth(k, 1000000, 4, 1e-3, 4);
    CHECK(b.algBw == Approx(4.0));
    CHECK(b.busBw == Approx(4.0));
  }
  CHECK(bandwidth(CollKind::AllReduce, 0, 4, 1e-3, 4).busBw == 0);
  CHECK(collSpec(CollKind::ReduceScatter).program == std::string("reduce_scatter_perf"));
  CHECK(collByProgram("alltoall_perf") == CollKind::AlltoAll);
  CHECK_FALSE(collByProgram("nope"));
}

TEST_CASE("element codecs: exact bit patterns, rounding, specials", "[bench_types]") {
  CHECK(bits(ncclFloat16, 1.0) == 0x3C00);
  CHECK(bits(ncclFloat16, 0.5) == 0x3800);
  CHECK(bits(ncclFloat16, 65504) == 0x7BFF);
  CHECK(bits(ncclFloat16, 70000) == 0x7C00);            // overflow: inf
  CHECK(bits(ncclFloat16, std::ldexp(1.0, -24)) == 0x0001);  // smallest subnormal
  CHECK(bits(ncclFloat16, 2049) == 0x6800);             // tie: to even (2048)
  CHECK(bits(ncclFloat16, 2051) == 0x6802);             // tie: to even (2052)
  CHECK(bits(ncclFloat16, -2.0) == 0xC000);
  CHECK(bits(ncclBfloat16, 1.0) == 0x3F80);
  CHECK(bits(ncclBfloat16, 256) == 0x4380);
  CHECK(bits(ncclFloat8e4m3, 1.0) == 0x38);
  CHECK(bits(ncclFloat8e4m3, 448) == 0x7E);
  CHECK(bits(ncclFloat8e4m3, 1000) == 0x7F);            // no inf in e4m3: NaN
  CHECK(bits(ncclFloat8e4m3, std::ldexp(1.0, -9)) == 0x01);
  CHECK(bits(ncclFloat8e5m2, 1.0) == 0x3C);
  CHECK(bits(ncclFloat8e5m2, 57344) == 0x7B);
  CHECK(bits(ncclFloat8e5m2, 1e6) == 0x7C);
  CHECK(std::isnan(decodeValue(ncclFloat8e4m3, encoded(ncclFloat8e4m3, NAN).data())));
  CHECK(std::isinf(decodeValue(ncclFloat16, encoded(ncclFloat16, INFINITY).data())));
  CHECK(bits(ncclInt8, 300) == 0x7F);  // saturates
  CHECK(bits(ncclUint8, -3) == 0);
  CHECK(decodeValue(ncclInt8, encoded(ncclInt8, -5).data()) == -5);

  // Every integer the check may use round-trips in every type.
  for (const TypeInfo& t : allTypes()) {
    double top = std::min(t.maxExactInt, 4096.0);
    for (double v = 0; v <= top; v += 1) {
      INFO(t.name << " " << v);
      REQUIRE(decodeValue(t.type, encoded(t.type, v).data()) == v);
    }
    for (double p = 1; p <= std::min(t.maxPowerOfTwo, 65536.0); p *= 2)
      REQUIRE(decodeValue(t.type, encoded(t.type, p).data()) == p);
    if (t.isFloat) CHECK(decodeValue(t.type, encoded(t.type, t.maxExactInt + 1).data()) ==
                         t.maxExactInt);  // the first integer that is not exact rounds down
  }
  CHECK(ulpAt(ncclFloat16, 1024) == 1);
  CHECK(ulpAt(ncclFloat32, 1) == std::ldexp(1.0, -23));
  CHECK(ulpAt(ncclInt32, 5) == 1);
  CHECK(typeByName("bfloat16")->type == ncclBfloat16);
  CHECK(typeByName("float32") == nullptr);
  CHECK(opByName("mulsum") == OpKind::MulSum);
  CHECK(std::string(opName(OpKind::Avg)) == "avg");
}

TEST_CASE("data check: inputs reduce exactly in any order", "[bench_check]") {
  const ncclDataType_t types[] = {ncclInt8,    ncclUint8,    ncclInt32,     ncclUint64,
                                  ncclFloat16, ncclFloat32,  ncclFloat64,   ncclBfloat16,
                                  ncclFloat8e4m3, ncclFloat8e5m2};
  const OpKind ops[] = {OpKind::Sum, OpKind::Prod, OpKind::Max, OpKind::Min, OpKind::MulSum,
                        OpKind::Avg};
  for (int nranks : {1, 2, 3, 4, 8, 17}) {
    std::vector<int> forward(nranks), backward(nranks);
    for (int r = 0; r < nranks; ++r) forward[r] = backward[nranks - 1 - r] = r;
    for (ncclDataType_t type : types)
      for (OpKind op : ops) {
        CheckSetup s;
        s.kind = CollKind::AllReduce;
        s.type = type;
        s.op = op;
        s.nranks = nranks;
        s.seed = 11;
        s.counts = collCounts(CollKind::AllReduce, 257, typeInfo(type).size, nranks);
        std::vector<char> expected(257 * typeInfo(type).size);
        fillExpected(s, expected.data(), nullptr);
        double tol = checkTolerance(s);
        INFO(typeInfo(type).name << " " << opName(op) << " nranks " << nranks);
        if (op == OpKind::Avg && typeInfo(type).isFloat && (nranks & (nranks - 1)) != 0) {
          CHECK(tol > 0);
        } else {
          CHECK(tol == 0);
        }
        for (const std::vector<int>& order : {forward, backward}) {
          std::vector<char> got = reduceInOrder(s, order, 0, 257);
          CHECK(countWrong(type, got.data(), expected.data(), 257, tol) == 0);
        }
      }
  }
}

TEST_CASE("data check: fill and verify every collective, in and out of place", "[bench_check]") {
  const CollKind kinds[] = {CollKind::AllReduce, CollKind::AllGather, CollKind::Broadcast,
                            CollKind::Reduce,    CollKind::ReduceScatter, CollKind::AlltoAll,
                            CollKind::SendRecv};
  for (CollKind kind : kinds)
    for (int nranks : {1, 3, 4})
      for (bool inPlace : {false, true}) {
        if (!checksPlacement(kind, inPlace)) continue;
        for (ncclDataType_t type : {ncclFloat32, ncclInt8, ncclFloat16, ncclFloat8e5m2}) {
          INFO(collSpec(kind).name << " nranks " << nranks << " inPlace " << inPlace << " "
                                   << typeInfo(type).name);
          int root = nranks - 1;
          CHECK(fakeCollectiveWrong(kind, type, OpKind::Sum, nranks, root, inPlace, 1000) == 0);
          if (kind == CollKind::AllReduce || kind == CollKind::ReduceScatter)
            for (OpKind op : {OpKind::Prod, OpKind::Max, OpKind::Min, OpKind::Avg, OpKind::MulSum})
              CHECK(fakeCollectiveWrong(kind, type, op, nranks, root, inPlace, 1000) == 0);
        }
      }
  // A corrupted element is counted, once per corrupted rank output.
  FakeCommKnobs bad;
  bad.corruptRank = 1;
  CHECK(fakeCollectiveWrong(CollKind::AllReduce, ncclFloat32, OpKind::Sum, 3, 0, false, 100,
                            bad) == 1);
  CHECK(fakeCollectiveWrong(CollKind::AllGather, ncclInt32, OpKind::Sum, 4, 0, true, 256, bad) ==
        1);
  CHECK(fakeCollectiveWrong(CollKind::Reduce, ncclFloat16, OpKind::Max, 2, 1, false, 64, bad) ==
        1);
}

TEST_CASE("data check: countWrong and its tolerance", "[bench_check]") {
  std::vector<float> want(100), got(100);
  for (int i = 0; i < 100; ++i) want[i] = got[i] = static_cast<float>(i);
  CHECK(countWrong(ncclFloat32, got.data(), want.data(), 100, 0) == 0);
  got[17] = 18;
  got[99] = -1;
  CHECK(countWrong(ncclFloat32, got.data(), want.data(), 100, 0) == 2);
  CHECK(countWrong(ncclFloat32, got.data(), want.data(), 100, 1.5) == 1);  // 17 vs 18 passes
  CHECK(countWrong(ncclFloat32, got.data(), want.data(), 50, 0) == 1);
  // Broadcast only writes the root's input; reduce leaves non-roots' buffers as they were.
  CheckSetup s;
  s.kind = CollKind::Broadcast;
  s.nranks = 3;
  s.rank = 1;
  s.root = 2;
  s.counts = collCounts(CollKind::Broadcast, 8, 4, 3);
  std::vector<float> in(8, -7.0f);
  fillInput(s, in.data());
  CHECK(in == std::vector<float>(8, -7.0f));
  s.kind = CollKind::Reduce;
  std::vector<float> before(8, 3.0f), exp(8, 0.0f);
  fillExpected(s, exp.data(), before.data());
  CHECK(exp == before);
  CHECK_FALSE(checksPlacement(CollKind::AlltoAll, true));
  CHECK_FALSE(checksPlacement(CollKind::SendRecv, true));
  CHECK(checksPlacement(CollKind::AlltoAll, false));
  CHECK(checksPlacement(CollKind::AllGather, true));
}

TEST_CASE("report text: numbers, rows, header and footer as nccl-tests prints them",
          "[bench_format]") {
  CHECK(formatFloat(1234.5, 7) == "1234.50");
  CHECK(formatFloat(12.345, 7) == "  12.35");
  CHECK(formatFloat(0.004, 7) == "   0.00");
  CHECK(formatFloat(12345.6, 7) == "12345.6");
  CHECK(formatFloat(123456.7, 7) == " 123457");
  CHECK(formatFloat(1234567.0, 7) == "1234567");
  CHECK(formatFloat(123456789.0, 7) == "1.2e+08");
  CHECK(formatFloat(999.99, 6) == "999.99");
  CHECK(formatFloat(1234.56, 6) == "1234.6");
  CHECK(formatFloat(123456.7, 6) == "123457");
  CHECK(formatFloat(12345678.0, 6) == " 1e+07");
  CHECK(formatFloat(INFINITY, 6) == "   inf");
  CHECK(rowPreamble(33554432, 8388608, "float", "sum", -1) ==
        "    33554432       8388608     float     sum      -1");
  CHECK(rowResult(1234.5, 27.18, 40.77, true, 0) == "  1234.50   27.18   40.77       0");
  CHECK(rowResult(5.123, 0.0016, 0.0024, true, 12) == "     5.12    0.00    0.00      12");
  CHECK(rowResult(5.123, 1, 2, false, 0) == "     5.12    1.00    2.00    N/A");
  std::string h = tableHeader("time");
  CHECK(h.find("#\n#                                                              out-of-place"
               "                       in-place          \n") == 0);
  CHECK(h.find("#       size         count      type   redop    root     time   algbw   busbw  "
               "#wrong     time   algbw   busbw  #wrong \n") != std::string::npos);
  CHECK(h.find("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)  "
               "           (us)  (GB/s)  (GB/s)         \n") != std::string::npos);
  CHECK(tableHeader("cputime").find("cputime") != std::string::npos);
  CHECK(footer(0, 40.84, -1, "all_reduce_perf") ==
        "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 40.84 \n#\n"
        "# Collective test concluded: all_reduce_perf\n");
  CHECK(footer(3, 1.5, 2.0, "x").find("# Out of bounds values : 3 FAILED\n"
                                      "# Avg bus bandwidth    : 1.5 FAILED\n") == 0);
  CHECK(footer(0, 1.9, 2.0, "x").find("1.9 OK") != std::string::npos);
}

TEST_CASE("json writer: nesting, commas, escapes", "[bench_json]") {
  JsonWriter w;
  w.beginObject();
  w.key("version");
  w.integer(2);
  w.key("args");
  w.beginList();
  w.str("a\"b\\c\n");
  w.str("d");
  w.endList();
  w.key("r");
  w.beginList();
  w.beginObject();
  w.key("t");
  w.number(1.5);
  w.key("n");
  w.null();
  w.key("ok");
  w.boolean(true);
  w.key("bad");
  w.number(NAN);
  w.endObject();
  w.endList();
  w.key("open");
  w.beginObject();
  w.key("dangling");
  w.closeAll();
  CHECK(w.text() ==
        "{\"version\":2,\"args\":[\"a\\\"b\\\\c\\n\",\"d\"],\"r\":[{\"t\":1.500000,\"n\":null,"
        "\"ok\":\"true\",\"bad\":\"nan\"}],\"open\":{\"dangling\":null}}");
  CHECK(w.depth() == 0);
}

TEST_CASE("thread reducer: combines, runs the leader once, aborts", "[bench_launcher]") {
  ThreadReducer red(3);
  std::vector<double> results(3);
  std::atomic<int> leaderRuns{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 3; ++t)
    ts.emplace_back([&, t] {
      double v = t + 1;
      red.reduce(t, v, ReduceOp::Sum, [&](double& x) {
        leaderRuns++;
        x *= 10;
        return true;
      });
      results[t] = v;
      double m = t == 1 ? -5 : t;
      red.reduce(t, m, ReduceOp::Min);
      double f = 100 + t;
      red.reduce(t, f, ReduceOp::First);
      results[t] += m + f;
    });
  for (std::thread& t : ts) t.join();
  for (double r : results) CHECK(r == 60 - 5 + 100);
  CHECK(leaderRuns == 1);
  ThreadReducer lonely(2);
  std::thread waiter([&] {
    double v = 1;
    CHECK_FALSE(lonely.reduce(0, v, ReduceOp::Sum));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  lonely.abort();
  waiter.join();
  CHECK(lonely.aborted());
  CHECK_FALSE(lonely.barrier(1));
}

TEST_CASE("launcher: arguments", "[bench_launcher]") {
  auto parseL = [](std::vector<std::string> args, LaunchSpec& spec, std::string& err) {
    args.insert(args.begin(), "ringcc-run");
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    return parseLaunchArgs(static_cast<int>(argv.size()), argv.data(), spec, err);
  };
  LaunchSpec s;
  std::string err;
  REQUIRE(parseL({"-n", "4", "all_reduce_perf", "-b", "8", "-e", "128M"}, s, err) ==
          LaunchParse::Run);
  CHECK(s.nprocs == 4);
  CHECK(s.argv == std::vector<std::string>{"all_reduce_perf", "-b", "8", "-e", "128M"});
  LaunchSpec s2;
  REQUIRE(parseL({"-n3", "--timeout=2.5", "--grace", "1", "--", "-weird"}, s2, err) ==
          LaunchParse::Run);
  CHECK(s2.nprocs == 3);
  CHECK(s2.timeoutSec == 2.5);
  CHECK(s2.graceSec == 1);
  CHECK(s2.argv == std::vector<std::string>{"-weird"});
  LaunchSpec s3;
  CHECK(parseL({"--np=2", "prog"}, s3, err) == LaunchParse::Run);
  CHECK(s3.nprocs == 2);
  LaunchSpec bad;
  CHECK(parseL({"-n", "0", "prog"}, bad, err) == LaunchParse::Error);
  CHECK(err.find("process count") != std::string::npos);
  CHECK(parseL({"-n", "2"}, bad, err) == LaunchParse::Error);
  CHECK(err.find("no program") != std::string::npos);
  CHECK(parseL({"--bogus", "1", "prog"}, bad, err) == LaunchParse::Error);
  CHECK(parseL({"-h"}, bad, err) == LaunchParse::Help);
  CHECK(launchUsage().find("RINGCC_UNIQUE_ID") != std::string::npos);
}

TEST_CASE("launcher: binding processes to cores", "[bench_launcher]") {
  using Plan = std::vector<std::vector<int>>;
  const std::vector<int> cpus = {0, 2, 4, 6};
  CHECK(planBinding(BindPolicy::Auto, 2, cpus) == Plan{{0, 2}, {4, 6}});
  CHECK(planBinding(BindPolicy::Auto, 3, cpus) == Plan{{0, 2}, {4}, {6}});
  CHECK(planBinding(BindPolicy::Auto, 4, cpus) == Plan{{0}, {2}, {4}, {6}});
  CHECK(planBinding(BindPolicy::Auto, 5, cpus).empty());  // oversubscribed: left unbound
  CHECK(planBinding(BindPolicy::Core, 5, cpus) == Plan{{0}, {2}, {4}, {6}, {0}});
  CHECK(planBinding(BindPolicy::None, 2, cpus).empty());
  CHECK(planBinding(BindPolicy::Auto, 2, {}).empty());

  BindPolicy policy = BindPolicy::None;
  CHECK(parseBindPolicy("core", policy));
  CHECK(policy == BindPolicy::Core);
  CHECK_FALSE(parseBindPolicy("socket", policy));
  LaunchSpec parsed;
  std::string err;
  const char* argv[] = {"ringcc-run", "--bind-to", "none", "prog"};
  REQUIRE(parseLaunchArgs(4, argv, parsed, err) == LaunchParse::Run);
  CHECK(parsed.bind == BindPolicy::None);
  const char* bad[] = {"ringcc-run", "--bind-to=numa", "prog"};
  CHECK(parseLaunchArgs(3, bad, parsed, err) == LaunchParse::Error);
  CHECK(err.find("--bind-to 'numa'") != std::string::npos);

  // The children really run on their share: each compares its own affinity with the plan
  // (computed here, inherited through fork) and exits non-zero on a difference.
  static std::vector<int> ours;
  static Plan plan;
  ours = allowedCpus();
  REQUIRE_FALSE(ours.empty());
  LaunchSpec s;
  s.nprocs = std::min<int>(2, static_cast<int>(ours.size()));
  s.uniqueIdHex = std::string(256, 'a');
  s.childMain = [] {
    const size_t rank = std::atoi(std::getenv(kEnvRank));
    const std::vector<int>& want = plan.empty() ? ours : plan[rank];
    return allowedCpus() == want ? 0 : 9;
  };
  for (BindPolicy p : {BindPolicy::Core, BindPolicy::None}) {
    s.bind = p;
    plan = planBinding(p, s.nprocs, ours);
    CHECK(plan.empty() == (p == BindPolicy::None));
    CHECK(runLaunch(s, stderr) == 0);
  }
  // With more than one core here, a bound child's share differs from the launcher's mask, so
  // an unbound child would have failed the check above.
  if (ours.size() > 1) CHECK(planBinding(BindPolicy::Core, 2, ours)[0] != ours);
}

TEST_CASE("launcher: protocol pieces", "[bench_launcher]") {
  ncclUniqueId id;
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; ++i) id.internal[i] = static_cast<char>(i * 7);
  std::string hex = uniqueIdToHex(id);
  CHECK(hex.size() == 256);
  CHECK(hex.substr(0, 6) == "00070e");
  std::optional<ncclUniqueId> back = uniqueIdFromHex(hex);
  REQUIRE(back);
  CHECK(std::memcmp(back->internal, id.internal, NCCL_UNIQUE_ID_BYTES) == 0);
  CHECK_FALSE(uniqueIdFromHex(hex.substr(1)));
  CHECK_FALSE(uniqueIdFromHex(std::string(256, 'g')));

  std::string stream = encodeCtrl(CtrlMessage{CtrlOp::Gather, CtrlReduce::Sum, "abc"}) +
                       encodeCtrl(CtrlMessage{CtrlOp::Allreduce, CtrlReduce::Max, ""});
  std::string partial = stream.substr(0, 10);
  bool bad = false;
  CHECK_FALSE(decodeCtrl(partial, bad));
  CHECK_FALSE(bad);
  std::optional<CtrlMessage> m1 = decodeCtrl(stream, bad);
  REQUIRE(m1);
  CHECK(m1->payload == "abc");
  std::optional<CtrlMessage> m2 = decodeCtrl(stream, bad);
  REQUIRE(m2);
  CHECK(m2->reduce == CtrlReduce::Max);
  CHECK(stream.empty());
  std::string junk(16, 'x');
  CHECK_FALSE(decodeCtrl(junk, bad));
  CHECK(bad);

  auto doubles = [](std::vector<double> v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
  };
  CtrlMessage reply;
  std::string err;
  REQUIRE(combineCtrl({{CtrlOp::Allreduce, CtrlReduce::Sum, doubles({1, 2})},
                       {CtrlOp::Allreduce, CtrlReduce::Sum, doubles({10, 20})}},
                      reply, err));
  CHECK(reply.payload == doubles({11, 22}));
  REQUIRE(combineCtrl({{CtrlOp::Allreduce, CtrlReduce::Min, doubles({1, 2})},
                       {CtrlOp::Allreduce, CtrlReduce::Min, doubles({-1, 5})}},
                      reply, err));
  CHECK(reply.payload == doubles({-1, 2}));
  CHECK_FALSE(combineCtrl({{CtrlOp::Allreduce, CtrlReduce::Sum, doubles({1})},
                           {CtrlOp::Gather, CtrlReduce::Sum, "x"}},
                          reply, err));
  CHECK(err.find("process 1") != std::string::npos);
  CHECK_FALSE(combineCtrl({{CtrlOp::Allreduce, CtrlReduce::Sum, doubles({1})},
                           {CtrlOp::Allreduce, CtrlReduce::Sum, doubles({1, 2})}},
                          reply, err));
}

TEST_CASE("launcher: exit codes, environment, stopping the others", "[bench_launcher]") {
  LaunchSpec s;
  s.nprocs = 3;
  s.uniqueIdHex = std::string(256, 'a');
  s.argv = {"/bin/sh", "-c",
            "test \"$RINGCC_NRANKS\" = 3 && test \"$RINGCC_LOCAL_SIZE\" = 3 && "
            "test \"$RINGCC_LOCAL_RANK\" = \"$RINGCC_RANK\" && test ${#RINGCC_UNIQUE_ID} = 256 "
            "&& test -n \"$RINGCC_CTRL_FD\" || exit 9; test \"$RINGCC_RANK\" = 2 && exit 5; "
            "exit 0"};
  CHECK(runLaunch(s, stderr) == 5);

  s.argv = {"/bin/sh", "-c", "exit 0"};
  CHECK(runLaunch(s, stderr) == 0);
  s.argv = {"/nonexistent/ringcc-test-prog"};
  CHECK(runLaunch(s, stderr) == 127);

  // One process fails early; the others (sleeping) are terminated within the grace period.
  LaunchSpec f;
  f.nprocs = 3;
  f.graceSec = 1;
  f.childMain = [] {
    int rank = std::atoi(std::getenv(kEnvRank));
    if (rank == 1) return 3;
    for (int i = 0; i < 600; ++i) usleep(100000);
    return 0;
  };
  auto t0 = std::chrono::steady_clock::now();
  CHECK(runLaunch(f, stderr) == 3);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));

  // After a plain non-zero exit the others may still finish within the grace period (process
  // 0 printing its report): they are not cut short.
  char marker[] = "/tmp/ringcc_bench_marker_XXXXXX";
  int mfd = mkstemp(marker);
  REQUIRE(mfd >= 0);
  close(mfd);
  std::remove(marker);
  static std::string markerPath;
  markerPath = marker;
  f.graceSec = 5;
  f.childMain = [] {
    int rank = std::atoi(std::getenv(kEnvRank));
    if (rank != 0) return 7;
    usleep(300000);
    std::FILE* m = std::fopen(markerPath.c_str(), "w");
    if (m) std::fclose(m);
    return 7;
  };
  CHECK(runLaunch(f, stderr) == 7);
  CHECK(access(marker, F_OK) == 0);
  std::remove(marker);

  // A process that ignores SIGTERM gets SIGKILL after the grace period.
  f.childMain = [] {
    int rank = std::atoi(std::getenv(kEnvRank));
    if (rank == 0) {
      usleep(100000);
      ::raise(SIGKILL);
    }
    signal(SIGTERM, SIG_IGN);
    for (int i = 0; i < 600; ++i) usleep(100000);
    return 0;
  };
  f.graceSec = 0.2;
  t0 = std::chrono::steady_clock::now();
  CHECK(runLaunch(f, stderr) == 128 + SIGKILL);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));

  LaunchSpec slow;
  slow.nprocs = 2;
  slow.timeoutSec = 0.3;
  slow.graceSec = 0.2;
  slow.childMain = [] {
    for (int i = 0; i < 600; ++i) usleep(100000);
    return 0;
  };
  CHECK(runLaunch(slow, stderr) == 124);

  volatile sig_atomic_t stop = SIGINT;
  CHECK(runLaunch(slow, stderr, &stop) == 128 + SIGINT);
}

TEST_CASE("launcher: control channel combines across processes", "[bench_launcher]") {
  LaunchSpec s;
  s.nprocs = 3;
  ncclUniqueId id{};
  id.internal[0] = 42;
  s.uniqueIdHex = uniqueIdToHex(id);
  s.childMain = [] {
    std::string err;
    std::unique_ptr<ProcessGroup> g = makeLauncherGroup(err);
    if (!g || g->size() != 3) return 10;
    if (!g->providesId()) return 11;
    ncclUniqueId got{};
    bool have = false;
    if (!g->shareId(got, have, err) || !have || got.internal[0] != 42) return 12;
    int r = g->rank();
    double v[2] = {static_cast<double>(r), 1};
    if (!g->allreduce(v, 2, CtrlReduce::Sum, err) || v[0] != 3 || v[1] != 3) return 13;
    double m = r == 1 ? -4 : r;
    if (!g->allreduce(&m, 1, CtrlReduce::Min, err) || m != -4) return 14;
    double x = r;
    if (!g->allreduce(&x, 1, CtrlReduce::Max, err) || x != 2) return 15;
    std::vector<std::string> all;
    if (!g->gather("rank" + std::to_string(r), all, err)) return 16;
    if (all != std::vector<std::string>{"rank0", "rank1", "rank2"}) return 17;
    return 0;
  };
  CHECK(runLaunch(s, stderr) == 0);

  // A process that leaves while the others wait closes their channels: they fail, no hang.
  s.childMain = [] {
    std::string err;
    std::unique_ptr<ProcessGroup> g = makeLauncherGroup(err);
    if (!g) return 10;
    if (g->rank() == 0) return 0;
    double v = 1;
    return g->allreduce(&v, 1, CtrlReduce::Sum, err) ? 20 : 9;
  };
  CHECK(runLaunch(s, stderr) == 9);
}

TEST_CASE("process group: from the launcher's variables", "[bench_launcher]") {
  std::string err;
  {
    ScopedEnv n(kEnvNranks, std::nullopt);
    CHECK(makeLauncherGroup(err) == nullptr);
    CHECK(err.empty());
  }
  {
    ScopedEnv n(kEnvNranks, "2"), r(kEnvRank, "1"), u(kEnvUniqueId, std::string(256, '0')),
        c(kEnvCtrlFd, std::nullopt);
    CHECK(makeLauncherGroup(err) == nullptr);
    CHECK(err.find("RINGCC_CTRL_FD") != std::string::npos);
  }
  {
    ScopedEnv n(kEnvNranks, "2"), r(kEnvRank, "2");
    CHECK(makeLauncherGroup(err) == nullptr);
    CHECK(err.find("RINGCC_RANK") != std::string::npos);
  }
  {
    ScopedEnv n(kEnvNranks, "1"), r(kEnvRank, "0"), u(kEnvUniqueId, "zz");
    CHECK(makeLauncherGroup(err) == nullptr);
    CHECK(err.find("RINGCC_UNIQUE_ID") != std::string::npos);
  }
  {
    ScopedEnv n(kEnvNranks, "1"), r(kEnvRank, "0"), u(kEnvUniqueId, std::nullopt);
    std::unique_ptr<ProcessGroup> g = makeLauncherGroup(err);
    REQUIRE(g);
    CHECK(g->size() == 1);
    CHECK_FALSE(g->providesId());
  }
}

TEST_CASE("driver: every collective on 4 threaded ranks, data checked", "[bench_driver]") {
  CommApi api = ringcc::test::fakeCommApi();
  const CollKind kinds[] = {CollKind::AllReduce, CollKind::AllGather, CollKind::Broadcast,
                            CollKind::Reduce,    CollKind::ReduceScatter, CollKind::AlltoAll,
                            CollKind::SendRecv};
  for (CollKind kind : kinds) {
    INFO(collSpec(kind).program);
    ToolRun t = runTool(kind, {"-t", "2", "-g", "2", "-b", "8", "-e", "4K", "-f", "4", "-n", "2",
                               "-w", "1", "-r", "3"},
                        api);
    INFO(t.out << t.err);
    CHECK(t.code == kPerfSuccess);
    std::vector<std::vector<std::string>> rows = t.rows();
    REQUIRE(rows.size() == 5);  // 8, 32, 128, 512, 2048
    for (const auto& r : rows) {
      CHECK(r[2] == "float");
      CHECK(r[3] == (collSpec(kind).hasOp ? "sum" : "none"));
      CHECK(r[4] == (collSpec(kind).hasRoot ? "3" : "-1"));
      CHECK(r[8] == "0");
      CHECK(r[12] == (checksPlacement(kind, true) ? "0" : "N/A"));
    }
    CHECK(t.out.find("# Out of bounds values : 0 OK") != std::string::npos);
    CHECK(t.out.find("# Avg bus bandwidth    : ") != std::string::npos);
    CHECK(t.out.find("#  Rank  3 Group  0 Pid") != std::string::npos);
    CHECK(t.out.find("# nThread 2 nGpus 2 minBytes 8 maxBytes 4096 step: 4(factor)") !=
          std::string::npos);
  }
  CHECK(ringcc::test::fakeLiveComms() == 0);
}

TEST_CASE("driver: types, operators, roots, option variants", "[bench_driver]") {
  CommApi api = ringcc::test::fakeCommApi();
  ToolRun all = runTool(CollKind::AllReduce,
                        {"-t", "3", "-b", "64", "-e", "256", "-f", "2", "-n", "1", "-d", "all",
                         "-o", "all"},
                        api);
  INFO(all.out << all.err);
  CHECK(all.code == kPerfSuccess);
  CHECK(all.rows().size() == 12 * 6 * 3);
  for (const auto& r : all.rows()) CHECK(r[8] == "0");

  ToolRun roots = runTool(CollKind::Reduce,
                          {"-g", "3", "-b", "1K", "-e", "1K", "-n", "1", "-r", "-1", "-o", "max"},
                          api);
  CHECK(roots.code == kPerfSuccess);
  REQUIRE(roots.rows().size() == 3);
  CHECK(roots.rows()[2][4] == "2");
  CHECK(roots.rows()[0][3] == "max");

  for (std::vector<std::string> extra :
       {std::vector<std::string>{"-m", "3"}, {"-z", "1"}, {"-a", "0"}, {"-a", "2"}, {"-a", "3"},
        {"-C", "1"}, {"-p", "1"}, {"-c", "0"}, {"-c", "3"}, {"-N", "2"}, {"-G", "1"},
        {"-i", "100", "-f", "1"}}) {
    std::vector<std::string> args = {"-t", "2", "-g", "2", "-b", "100", "-e", "300", "-n", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    ToolRun t = runTool(CollKind::AllReduce, args, api);
    INFO(extra[0] << " " << extra[1] << "\n" << t.out << t.err);
    CHECK(t.code == kPerfSuccess);
    CHECK(t.out.find("Out of bounds values : 0 OK") != std::string::npos);
  }
  ToolRun noCheck = runTool(CollKind::AllGather, {"-t", "2", "-b", "1K", "-e", "1K", "-c", "0"}, api);
  REQUIRE(noCheck.rows().size() == 1);
  CHECK(noCheck.rows()[0][8] == "N/A");
  ToolRun fallback =
      runTool(CollKind::AlltoAll, {"-t", "3", "-b", "1K", "-e", "4K", "-f", "2"},
              ringcc::test::fakeCommApi(FakeCommKnobs{.noAlltoAll = true}));
  CHECK(fallback.code == kPerfSuccess);
  CHECK(fallback.rows().size() == 3);
  ToolRun cycles = runTool(CollKind::AllReduce, {"-b", "8", "-e", "16", "-f", "2", "-N", "3"}, api);
  CHECK(cycles.rows().size() == 6);
  CHECK(ringcc::test::fakeLiveComms() == 0);
}

TEST_CASE("driver: wrong data, missing entry points, device memory, bad usage",
          "[bench_driver]") {
  FakeCommKnobs corrupt;
  corrupt.corruptRank = 2;
  ToolRun bad = runTool(CollKind::AllReduce, {"-t", "4", "-b", "64", "-e", "128", "-f", "2", "-n", "1"},
                        ringcc::test::fakeCommApi(corrupt));
  INFO(bad.out << bad.err);
  CHECK(bad.code == kPerfWrongData);
  REQUIRE(bad.rows().size() == 2);
  CHECK(bad.rows()[0][8] == "1");
  CHECK(bad.rows()[0][12] == "1");
  // One thread saw wrong data in each of 4 checks.
  CHECK(bad.out.find("# Out of bounds values : 4 FAILED") != std::string::npos);

  ToolRun missing = runTool(CollKind::AllReduce, {"-b", "8", "-e", "8"},
                            ringcc::test::fakeCommApi(FakeCommKnobs{.noAllReduce = true}));
  CHECK(missing.code == kPerfNotImplemented);
  CHECK(missing.err.find("does not provide ncclAllReduce") != std::string::npos);

  ToolRun cuda = runTool(CollKind::AllReduce, {"-t", "2", "-b", "8", "-e", "8"},
                         ringcc::test::fakeCommApi(FakeCommKnobs{.cudaMemory = true}));
  // A CUDA communicator where the tool has no CUDA driver to allocate device buffers with.
  CHECK(cuda.code == kPerfCudaError);
  CHECK(cuda.err.find("uses CUDA device memory, but the tool cannot allocate device buffers") !=
        std::string::npos);

  CommApi api = ringcc::test::fakeCommApi();
  ToolRun root = runTool(CollKind::Broadcast, {"-t", "2", "-r", "2", "-b", "8", "-e", "8"}, api);
  CHECK(root.code == kPerfInvalidUsage);
  CHECK(root.err.find("invalid root 2 for 2 ranks") != std::string::npos);
  ToolRun args = runTool(CollKind::AllReduce, {"-b", "2K", "-e", "1K"}, api);
  CHECK(args.code == kPerfBadArguments);
  CHECK(args.err.find("invalid sizes") != std::string::npos);
  ToolRun help = runTool(CollKind::SendRecv, {"-h"}, api);
  CHECK(help.code == kPerfSuccess);
  CHECK(help.out.find("USAGE: sendrecv_perf") == 0);
  {
    ScopedEnv minBw("NCCL_TESTS_MIN_BW", "1e12");
    ToolRun slow = runTool(CollKind::AllReduce, {"-t", "2", "-b", "8", "-e", "8", "-n", "1"}, api);
    CHECK(slow.code == kPerfWrongData);
    CHECK(slow.out.find("FAILED") != std::string::npos);
  }
  CHECK(ringcc::test::fakeLiveComms() == 0);
}

TEST_CASE("driver: -T ends a stuck run with a timeout", "[bench_driver]") {
  FakeCommKnobs hang;
  hang.hangRank = 1;
  auto t0 = std::chrono::steady_clock::now();
  ToolRun t = runTool(CollKind::AllReduce, {"-t", "2", "-b", "8", "-e", "8", "-T", "1"},
                      ringcc::test::fakeCommApi(hang));
  INFO(t.out << t.err);
  CHECK(t.code == kPerfTimeout);
  CHECK(t.out.find("Test timeout (1s)") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(8));
}

TEST_CASE("driver: -J writes nccl-tests' JSON layout", "[bench_driver]") {
  char dir[] = "/tmp/ringcc_bench_json_XXXXXX";
  REQUIRE(mkdtemp(dir));
  std::string path = std::string(dir) + "/r.json";
  CommApi api = ringcc::test::fakeCommApi();
  ToolRun t = runTool(CollKind::AllReduce, {"-t", "2", "-b", "8", "-e", "32", "-f", "2", "-J", path},
                      api);
  CHECK(t.code == kPerfSuccess);
  CHECK(t.out.find("# Writing JSON output to " + path) == 0);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string json = ss.str();
  CHECK(json.rfind("{\"version\":2,", 0) == 0);
  CHECK(json.find("\"config\":{\"nthreads\":2,\"ngpus\":1,\"minimum_bytes\":8,") !=
        std::string::npos);
  CHECK(json.find("\"results\":[{\"size\":8,\"count\":2,\"type\":\"float\",\"redop\":\"sum\","
                  "\"root\":-1,\"out_of_place\":{\"time\":") != std::string::npos);
  CHECK(json.find("{\"size\":32,\"count\":8,") != std::string::npos);
  CHECK(json.find("\"out_of_bounds\":{\"count\":0,\"okay\":\"true\"}") != std::string::npos);
  CHECK(json.find("\"end_time\":") != std::string::npos);
  CHECK(json.back() == '}');
  // A second run does not overwrite: it takes name.0.
  ToolRun again = runTool(CollKind::AllReduce, {"-b", "8", "-e", "8", "-J", path}, api);
  CHECK(again.out.find("# Writing JSON output to " + path + ".0") == 0);
  std::remove((path + ".0").c_str());
  std::remove(path.c_str());
  rmdir(dir);
}
