#include "bench/launcher/binding.h"

#include <sched.h>

namespace ringcc::bench {

bool parseBindPolicy(const std::string& s, BindPolicy& out) {
  if (s == "auto")
    out = BindPolicy::Auto;
  else if (s == "core")
    out = BindPolicy::Core;
  else if (s == "none")
    out = BindPolicy::None;
  else
    return false;
  return true;
}

std::vector<int> allowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

std::vector<std::vector<int>> planBinding(BindPolicy policy, int nprocs,
                                          const std::vector<int>& cpus) {
  const int ncpus = static_cast<int>(cpus.size());
  if (policy == BindPolicy::None || ncpus == 0 || nprocs <= 0) return {};
  if (nprocs > ncpus && policy == BindPolicy::Auto) return {};
  std::vector<std::vector<int>> plan(nprocs);
  if (nprocs > ncpus) {
    for (int r = 0; r < nprocs; ++r) plan[r] = {cpus[r % ncpus]};
    return plan;
  }
  const int share = ncpus / nprocs, extra = ncpus % nprocs;
  int next = 0;
  for (int r = 0; r < nprocs; ++r) {
    const int take = share + (r < extra ? 1 : 0);
    plan[r].assign(cpus.begin() + next, cpus.begin() + next + take);
    next += take;
  }
  return plan;
}

}  // namespace ringcc::bench
