// Seeing communication (docs/monitoring.md): per-operation records, the straggler analysis of
// ringcc-monitor over them, and hang reports.
//
//   [monitor_unit]  the record's JSON line and the hang report's findings, as pure functions
//   [trace]         3 forked ranks with RINGCC_TRACE: every call is recorded once, numbered,
//                   with sane times; ringcc-monitor names the rank that was delayed as the
//                   straggler and draws its pictures
//   [hang]          a rank that never calls: SIGUSR1 to another rank makes every rank log a
//                   report naming it; so does NCCL_TIMEOUT
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fault/fault_util.h"
#include "nccl.h"
#include "src/base/log.h"
#include "src/sched/builders.h"
#include "src/trace/hang_report.h"
#include "src/trace/trace.h"
#include "support/ranks.h"
#include "support/test_env.h"

using namespace ringcc;
using namespace ringcc::test;

namespace {

constexpr int kLimitS = 60;

std::string makeTempDir() {
  char tmpl[] = "/tmp/ringcc-monitor-XXXXXX";
  const char* d = mkdtemp(tmpl);
  return d ? d : "";
}

std::vector<std::string> filesIn(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) out.push_back(dir + "/" + e->d_name);
    closedir(d);
  }
  return out;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void removeTree(const std::string& dir) {
  if (dir.size() > 5) std::system(("rm -rf '" + dir + "'").c_str());
}

// The value of "key": in a flat JSON line (numbers and strings without quotes inside).
std::string field(const std::string& line, const std::string& key) {
  const std::string k = "\"" + key + "\":";
  size_t p = line.find(k);
  if (p == std::string::npos) return "";
  p += k.size();
  if (line[p] == '"') return line.substr(p + 1, line.find('"', p + 1) - p - 1);
  return line.substr(p, line.find_first_of(",}", p) - p);
}
uint64_t num(const std::string& line, const std::string& key) {
  return std::strtoull(field(line, key).c_str(), nullptr, 10);
}

// Sends this process's WARN log to DIR/<name> (a forked rank's own file).
void logTo(const std::string& dir, const std::string& name) {
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", (dir + "/" + name).c_str(), 1);
  resetLogging();
}

}  // namespace

TEST_CASE("a trace record is one JSON line with nccl-tests' bus bandwidth", "[monitor_unit]") {
  TraceRecord r;
  r.seq = 7;
  r.batch = 5;
  r.count = 1 << 18;  // 1 MiB of float32
  r.callUs = 1000;
  r.startUs = 1010;
  r.endUs = 2010;  // 1 ms
  r.coll = static_cast<uint8_t>(Coll::AllReduce);
  r.type = ncclFloat32;
  r.op = ncclSum;
  r.algo = static_cast<uint8_t>(Algo::Ring);
  r.proto = 2;
  r.nChannels = 2;
  const std::string line = formatTraceRecord(r, TraceSource{0xabcULL, 1, 4, 42, "h"});
  INFO(line);
  CHECK(line.front() == '{');
  CHECK(line.back() == '}');
  CHECK(line.find('\n') == std::string::npos);
  CHECK(field(line, "comm") == "0000000000000abc");
  CHECK(field(line, "coll") == "AllReduce");
  CHECK(field(line, "type") == "float32");
  CHECK(field(line, "op") == "sum");
  CHECK(field(line, "algo") == "Ring");
  CHECK(num(line, "seq") == 7);
  CHECK(num(line, "rank") == 1);
  CHECK(num(line, "channels") == 2);
  CHECK(num(line, "bytes") == (1u << 20));
  CHECK(num(line, "time_us") == 1000);
  // 1 MiB in 1 ms = 1.048576 GB/s algbw; all-reduce on 4 ranks: x 2*3/4.
  CHECK(std::stod(field(line, "algbw_gbs")) == Approx(1.048576).epsilon(1e-3));
  CHECK(std::stod(field(line, "busbw_gbs")) == Approx(1.048576 * 1.5).epsilon(1e-3));

  r.coll = static_cast<uint8_t>(Coll::Send);
  r.root = 3;
  r.algo = 0xff;
  const std::string send = formatTraceRecord(r, TraceSource{0xabcULL, 1, 4, 42, "h"});
  CHECK(num(send, "peer") == 3);
  CHECK(field(send, "root") == "-1");
  CHECK(field(send, "op") == "none");
  CHECK(field(send, "algo") == "P2p");
}

namespace {

RankCall inCall(uint64_t seq, Coll coll, uint64_t count) {
  RankCall r;
  r.answered = true;
  r.call.inCall = true;
  r.call.firstSeq = r.call.lastSeq = seq;
  r.call.sig.coll = static_cast<uint8_t>(coll);
  r.call.sig.count = count;
  r.call.sig.type = ncclFloat32;
  r.call.sig.op = collReduces(coll) ? ncclSum : 0xff;
  r.call.sig.root = -1;
  return r;
}

RankCall idle(uint64_t seq) {
  RankCall r = inCall(seq, Coll::AllReduce, 16);
  r.call.inCall = false;
  return r;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string t;
  for (const auto& l : lines) t += l + "\n";
  return t;
}

}  // namespace

TEST_CASE("hang findings name the rank that never called, another call, and silence",
          "[monitor_unit]") {
  SECTION("a rank that never called") {
    auto f =
        hangFindings({inCall(5, Coll::AllReduce, 16), inCall(5, Coll::AllReduce, 16), idle(4)});
    INFO(joined(f));
    REQUIRE(f.size() == 1);
    CHECK(f[0].find("rank 2 has not called #5") != std::string::npos);
    CHECK(f[0].find("ranks 0,1 wait in call #5 AllReduce(16 x float32, sum)") != std::string::npos);
  }
  SECTION("a rank that called something else under the same number") {
    auto f = hangFindings({inCall(3, Coll::AllReduce, 16), inCall(3, Coll::AllGather, 8)});
    INFO(joined(f));
    REQUIRE(f.size() == 1);
    CHECK(f[0].find("rank 1 made another call") != std::string::npos);
    CHECK(f[0].find("AllGather(8 x float32)") != std::string::npos);
  }
  SECTION("a rank behind in an earlier call, and one that did not answer") {
    RankCall silent;
    auto f = hangFindings({inCall(9, Coll::AllReduce, 16), inCall(8, Coll::AllReduce, 16), silent});
    INFO(joined(f));
    REQUIRE(f.size() == 2);
    CHECK(f[0].find("rank 2 did not answer") != std::string::npos);
    CHECK(f[1].find("rank 1 is still in an earlier call #8") != std::string::npos);
  }
  SECTION("ranks that agree and wait for nothing") {
    CHECK(hangFindings({idle(4), idle(4)}).empty());
  }
}

TEST_CASE("records count every call, and ringcc-monitor finds the delayed rank", "[trace]") {
  const std::string dir = makeTempDir();
  REQUIRE(!dir.empty());
  constexpr int kRanks = 3, kDelayed = 2, kAllReduces = 6, kDelayMs = 40;
  ncclUniqueId id = newUniqueId();
  int failed = 0;
  {
    ScopedEnv trace("RINGCC_TRACE", dir);
    failed = runProcesses(
        kRanks,
        [&](int rank) {
          ncclComm_t comm;
          if (ncclCommInitRank(&comm, kRanks, id, rank) != ncclSuccess) return 10;
          std::vector<float> in(4096, 1.0f), out(4096 * kRanks);
          for (int i = 0; i < kAllReduces; ++i) {
            if (rank == kDelayed) usleep(kDelayMs * 1000);  // the straggler
            if (ncclAllReduce(in.data(), out.data(), 4096, ncclFloat32, ncclSum, comm, nullptr) !=
                ncclSuccess)
              return 11;
          }
          if (ncclBroadcast(in.data(), out.data(), 100, ncclFloat32, 1, comm, nullptr) !=
              ncclSuccess)
            return 12;
          // A group: a ring of send/recv (two records per rank, one batch).
          ncclGroupStart();
          ncclSend(in.data(), 256, ncclFloat32, (rank + 1) % kRanks, comm, nullptr);
          ncclRecv(out.data(), 256, ncclFloat32, (rank + kRanks - 1) % kRanks, comm, nullptr);
          if (ncclGroupEnd() != ncclSuccess) return 13;
          if (ncclAllGather(in.data(), out.data(), 1024, ncclFloat32, comm, nullptr) != ncclSuccess)
            return 14;
          return ncclCommDestroy(comm) == ncclSuccess ? 0 : 15;
        },
        kLimitS);
  }
  REQUIRE(failed == 0);
  const std::vector<std::string> files = filesIn(dir, "ringcc-");
  REQUIRE(files.size() == kRanks);
  std::map<int, int> ranksSeen;
  for (const std::string& path : files) {
    std::istringstream lines(readFile(path));
    std::string line;
    std::map<std::string, int> colls;
    std::vector<uint64_t> seqs;
    int rank = -1;
    while (std::getline(lines, line)) {
      INFO(path << ": " << line);
      rank = static_cast<int>(num(line, "rank"));
      ++colls[field(line, "coll")];
      seqs.push_back(num(line, "seq"));
      CHECK(num(line, "nranks") == kRanks);
      CHECK(field(line, "ok") == "true");
      CHECK(num(line, "call_us") <= num(line, "start_us"));
      CHECK(num(line, "start_us") <= num(line, "end_us"));
      CHECK(num(line, "bytes") > 0);
      if (field(line, "coll") == "AllReduce") {
        CHECK(num(line, "count") == 4096);
        CHECK(num(line, "bytes") == 4096 * 4);
        CHECK(field(line, "proto") != "none");
        CHECK(num(line, "channels") >= 1);
      }
      if (field(line, "coll") == "Send")
        CHECK(num(line, "peer") == static_cast<uint64_t>((rank + 1) % kRanks));
    }
    ++ranksSeen[rank];
    CHECK(colls["AllReduce"] == kAllReduces);
    CHECK(colls["Broadcast"] == 1);
    CHECK(colls["Send"] == 1);
    CHECK(colls["Recv"] == 1);
    CHECK(colls["AllGather"] == 1);
    // Numbered 1.. in call order, each once.
    REQUIRE(seqs.size() == kAllReduces + 4);
    for (size_t i = 0; i < seqs.size(); ++i) CHECK(seqs[i] == i + 1);
  }
  CHECK(ranksSeen.size() == kRanks);

  // The tool: the delayed rank is the straggler, and the pictures are drawn.
  const std::string tool = std::string(RINGCC_BUILD_ROOT) + "/bench/ringcc-monitor";
  const int rc = std::system(
      ("/usr/bin/python3 " + tool + " " + dir + " > " + dir + "/monitor.out 2>&1").c_str());
  INFO(readFile(dir + "/monitor.out"));
  REQUIRE(rc == 0);
  for (const char* png : {"/timeline.png", "/busbw.png", "/stragglers.png", "/report.html"}) {
    struct stat st {};
    CHECK(stat((dir + png).c_str(), &st) == 0);
    CHECK(st.st_size > 1000);
  }
  const std::string summary = readFile(dir + "/summary.json");
  INFO(summary);
  // The straggler list is sorted by the wait caused: the delayed rank first, and every
  // all-reduce (at least) had it last.
  const size_t ranks = summary.find("\"ranks\"");
  REQUIRE(ranks != std::string::npos);
  const std::string first = summary.substr(ranks, summary.find('}', ranks) - ranks);
  CHECK(num(first.substr(first.find('{')), "rank") == kDelayed);
  CHECK(num(first.substr(first.find('{')), "last") >= kAllReduces - 1);
  CHECK(num(first.substr(first.find('{')), "caused_wait_us") >=
        static_cast<uint64_t>((kAllReduces - 1) * kDelayMs * 1000));
  removeTree(dir);
}

namespace {

// Ranks 0 and 1 call an all-reduce that rank 2 makes late (after `lateMs`) or never.
// `signalTo`: the rank that gets SIGUSR1 from rank 2 while the others wait (-1: none).
int hangScenario(const std::string& dir, int signalTo, int lateMs, int* results) {
  constexpr int kRanks = 3;
  SharedArray<int> pids(kRanks), res(kRanks);
  ncclUniqueId id = newUniqueId();
  int failed = runProcesses(
      kRanks,
      [&](int rank) {
        logTo(dir, "rank" + std::to_string(rank) + ".log");
        pids[rank] = getpid();
        ncclComm_t comm;
        if (ncclCommInitRank(&comm, kRanks, id, rank) != ncclSuccess) return 10;
        std::vector<float> in(1024, 1.0f), out(1024);
        // One call everyone makes, so the hung one is #2.
        if (ncclAllReduce(in.data(), out.data(), 1024, ncclFloat32, ncclSum, comm, nullptr) !=
            ncclSuccess)
          return 11;
        if (rank == 2) {
          usleep(300 * 1000);  // the others are inside #2 by now
          if (signalTo >= 0) kill(pids[signalTo], SIGUSR1);
          if (lateMs < 0) {
            usleep(4000 * 1000);  // never calls; leaves once the others timed out
            res[rank] = ncclCommDestroy(comm);
            return 0;
          }
          usleep(lateMs * 1000);
        }
        res[rank] = ncclAllReduce(in.data(), out.data(), 1024, ncclFloat32, ncclSum, comm, nullptr);
        if (res[rank] == ncclSuccess)
          ncclCommDestroy(comm);
        else
          ncclCommAbort(comm);
        return 0;
      },
      kLimitS);
  for (int r = 0; r < kRanks; ++r) results[r] = res[r];
  return failed;
}

}  // namespace

TEST_CASE("SIGUSR1 to one rank makes every rank report, naming the rank that has not called",
          "[hang]") {
  const std::string dir = makeTempDir();
  REQUIRE(!dir.empty());
  int results[3] = {};
  // Rank 2 signals rank 1, then calls 2.5 s later: the job goes on after the report.
  REQUIRE(hangScenario(dir, 1, 2500, results) == 0);
  for (int r = 0; r < 3; ++r) {
    const std::string log = readFile(dir + "/rank" + std::to_string(r) + ".log");
    INFO("rank " << r << " log:\n" << log);
    CHECK(results[r] == ncclSuccess);
    CHECK(log.find("(SIGUSR1 on rank 1)") != std::string::npos);
    CHECK(log.find("rank 2: not in a call; last call #1 AllReduce(1024 x float32, sum) "
                   "finished") != std::string::npos);
    CHECK(log.find("rank 2 has not called #2") != std::string::npos);
    CHECK(log.find("ranks 0,1 wait in call #2 AllReduce(1024 x float32, sum)") !=
          std::string::npos);
    if (r < 2) {
      // The waiting ranks' engines say where they wait: call, channel, step, peer, bytes.
      CHECK(log.find("AllReduce #2 channel 0 lane") != std::string::npos);
      CHECK(log.find("bytes of the step done") != std::string::npos);
    }
  }
  removeTree(dir);
}

TEST_CASE("NCCL_TIMEOUT logs the hang report before the call fails", "[hang]") {
  const std::string dir = makeTempDir();
  REQUIRE(!dir.empty());
  int results[3] = {};
  {
    ScopedEnv timeout("NCCL_TIMEOUT", "1500");
    REQUIRE(hangScenario(dir, -1, -1, results) == 0);
  }
  for (int r = 0; r < 2; ++r) {
    const std::string log = readFile(dir + "/rank" + std::to_string(r) + ".log");
    INFO("rank " << r << " log:\n" << log);
    CHECK(results[r] == ncclRemoteError);
    CHECK(log.find("(NCCL_TIMEOUT on rank") != std::string::npos);
    CHECK(log.find("rank 2 has not called #2") != std::string::npos);
  }
  // The rank that never called reports too, though nothing timed out there.
  const std::string log2 = readFile(dir + "/rank2.log");
  INFO("rank 2 log:\n" << log2);
  CHECK(log2.find("rank 2 has not called #2") != std::string::npos);
  removeTree(dir);
}
