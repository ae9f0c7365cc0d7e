#include "src/exec/wait_policy.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>

#include "src/base/peer_info.h"
#include "src/core/comm.h"

namespace ringcc {
namespace {

// Idle polls of the runners before the engine starts yielding the core between polls, when
// this host has a core for every rank of the communicator on it: the peer runs meanwhile, and
// a yield only adds a system call to noticing its data. With more local ranks than cores the
// peer we wait for may need our core, so the engine yields from the first idle poll
// (measured: 4 ranks on 2 cores, 8 B all-reduce ~9-12 us with 32 polls, ~5-9 us with none).
constexpr int kPollsBeforeYield = 32;

// Slow rounds (past NCCL_SPIN_COUNT) on which the counter a lane waits on had already moved
// past the value it named, before the engine naps on the counter's current value instead
// (WaitPolicy::nap). One or two such rounds are a publish racing the poll; more mean the lane
// waits for something else.
constexpr int kStaleNaps = 8;

// Whether ranks of `comm` outnumber the cores they can run on: this process's ranks against the
// cores it may use (its affinity), or this host's ranks against the host's cores. A process
// bound to one core (ringcc-run and mpirun bind each process to its share of the cores) with
// one rank is not oversubscribed, even though the host's other ranks are not in its mask.
// (A container limited to fewer cores than the host has counts the host's: its ranks then poll
// kPollsBeforeYield times before they yield, a fraction of a microsecond per wait.)
bool oversubscribed(const ncclComm* comm) {
  const PeerInfo& self = comm->peers[comm->rank];
  int onHost = 0, inProcess = 0;
  for (const PeerInfo& p : comm->peers) {
    onHost += sameHost(p, self) ? 1 : 0;
    inProcess += sameProcess(p, self) ? 1 : 0;
  }
  cpu_set_t set;
  const int mine = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  return inProcess > mine || onHost > std::max<long>(online, mine);
}

}  // namespace

int pollsBeforeYield(const ncclComm* comm) { return oversubscribed(comm) ? 0 : kPollsBeforeYield; }

void WaitPolicy::yield() {
  sched_yield();
  // The clock is read every 64th yield only: the bound needs no finer grain, and a clock read
  // per poll would cost more than the poll.
  if (idleRounds_ % 64 != 0) return;
  const auto now = Clock::now();
  if (spinStart_ == Clock::time_point{})
    spinStart_ = now;
  else if (now - spinStart_ > std::chrono::milliseconds(2))
    idleRounds_ = spinCount_ - 1;  // the next idle round takes the slow path
}

void WaitPolicy::nap(FifoCounter* counter, uint32_t value, int micros) {
  // An LL receiver names tail at the slot it waits for without reading it (kernels/prims.h),
  // so the nap returns at once if tail moved meanwhile, and the next round finds the lines.
  if (loadCounter(counter) != value && ++staleNaps_ > kStaleNaps) value = loadCounter(counter);
  napOnCounter(counter, value, micros);
}

}  // namespace ringcc
