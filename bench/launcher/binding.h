// Which cores each process ringcc-run starts may run on, as mpirun binds its ranks: with no
// more processes than cores, each process gets its own equal share of the cores the launcher
// may use (one core each on a machine with as many cores as processes); with more, none is
// bound (the scheduler spreads them, as mpirun leaves oversubscribed ranks unbound).
//
// Why bind: two unbound processes that wake each other through futexes tend to be placed on
// the same core by the scheduler's wake-up affinity, and each hand-off then costs a context
// switch (an 8-byte all-reduce between 2 processes on 2 cores took 3.5 us instead of 0.7 in
// about one run in four). Bound, they stay on their own cores.
#pragma once

#include <string>
#include <vector>

namespace ringcc::bench {

enum class BindPolicy {
  Auto,  // cores when processes <= cores, else none (the default)
  Core,  // always: with more processes than cores, process r shares core r mod cores
  None,  // never
};

// "auto", "core" or "none".
bool parseBindPolicy(const std::string& s, BindPolicy& out);

// The CPUs the calling process may run on (its affinity mask), in increasing order.
std::vector<int> allowedCpus();

// The CPUs of each of `nprocs` processes under `policy`, from `cpus`; empty when the processes
// are left unbound. Shares are contiguous runs of `cpus`, the first ones one larger when the
// cores do not divide evenly.
std::vector<std::vector<int>> planBinding(BindPolicy policy, int nprocs,
                                          const std::vector<int>& cpus);

}  // namespace ringcc::bench
