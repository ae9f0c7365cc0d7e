// comm_init_bench: how long communicator init takes, per rank, under ringcc-run.
//
//   ringcc-run -n 8 comm_init_bench [iterations]
//
// Round 0 creates a communicator from the launcher's unique id (its time includes the skew
// of process start-up). A unique id serves one rendezvous, so every later round gets a fresh
// id from rank 0, carried to the others by an all-gather on the round-0 communicator, and
// creates and destroys one more communicator. Rank 0 prints each round's ncclCommInitRank
// time as the slowest rank saw it.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench/launcher/launch_protocol.h"
#include "nccl.h"

namespace {

double nowMicros() {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

int die(const char* what, ncclResult_t r) {
  fprintf(stderr, "comm_init_bench: %s: %s\n", what, ncclGetErrorString(r));
  return 3;
}

}  // namespace

int main(int argc, char** argv) {
  auto me = ringcc::bench::launchedRankFromEnv();
  if (!me) {
    fprintf(stderr, "comm_init_bench: run me under ringcc-run -n N\n");
    return 2;
  }
  const int rank = me->rank, nranks = me->nranks;
  const int rounds = argc > 1 ? atoi(argv[1]) : 5;
  ncclUniqueId id = me->id;

  // Round 0 uses the launcher's id; it also yields the communicator that hands out the ids of
  // the later rounds (rank 0 makes them, an all-gather of bytes carries them).
  ncclComm_t control;
  double t0 = nowMicros();
  ncclResult_t r = ncclCommInitRank(&control, nranks, id, rank);
  double first = nowMicros() - t0;
  if (r != ncclSuccess) return die("ncclCommInitRank", r);

  std::vector<double> times{first};
  for (int i = 1; i < rounds; ++i) {
    std::vector<char> ids(sizeof(ncclUniqueId) * nranks, 0);
    if (rank == 0 && (r = ncclGetUniqueId(&id)) != ncclSuccess) return die("ncclGetUniqueId", r);
    std::memcpy(ids.data() + rank * sizeof(id), &id, sizeof(id));
    r = ncclAllGather(ids.data() + rank * sizeof(id), ids.data(), sizeof(id), ncclUint8, control,
                      nullptr);
    if (r != ncclSuccess) return die("ncclAllGather", r);
    std::memcpy(&id, ids.data(), sizeof(id));
    ncclComm_t comm;
    t0 = nowMicros();
    r = ncclCommInitRank(&comm, nranks, id, rank);
    times.push_back(nowMicros() - t0);
    if (r != ncclSuccess) return die("ncclCommInitRank", r);
    ncclCommDestroy(comm);
  }
  // The slowest rank's time per round.
  std::vector<double> slowest(times.size());
  r = ncclAllReduce(times.data(), slowest.data(), times.size(), ncclFloat64, ncclMax, control,
                    nullptr);
  if (r != ncclSuccess) return die("ncclAllReduce", r);
  if (rank == 0) {
    printf("# comm_init_bench: %d ranks in %d processes, ncclCommInitRank time (slowest rank)\n",
           nranks, nranks);
    for (size_t i = 0; i < slowest.size(); ++i)
      printf("round %zu: %.1f ms%s\n", i, slowest[i] / 1000.0,
             i == 0 ? " (includes process start-up skew)" : "");
  }
  ncclCommDestroy(control);
  return 0;
}
