// ringcc-run's engine: start N local processes with ringcc's rank variables, serve their
// control channel, and bring them all down together.
//
// Exit code: the first non-zero code a child ended with (128+signal for a child killed by a
// signal), else 0. When a child dies by a signal the others get SIGTERM at once and, `graceSec`
// later, SIGKILL, as mpirun does, since ranks waiting on a dead peer would otherwise hang. A
// child that exits with a non-zero code gives the others `graceSec` to end by themselves
// first (all ranks of a failed check exit non-zero together, and process 0 may still be
// printing). A `timeoutSec` run that is still going is brought down at once and exits 124. The children inherit stdout/stderr and the process group, so Ctrl-C reaches
// them directly.
#pragma once

#include <csignal>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench/launcher/binding.h"

namespace ringcc::bench {

struct LaunchSpec {
  int nprocs = 1;
  std::vector<std::string> argv;  // program (searched in PATH) and its arguments
  // Tests: run this in each forked child instead of exec'ing argv (its environment is set as
  // the exec'ed program's would be); the child exits with its return value.
  std::function<int()> childMain;
  std::string uniqueIdHex;  // RINGCC_UNIQUE_ID for every child
  double timeoutSec = 0;    // 0: no limit
  double graceSec = 5;      // SIGTERM to SIGKILL
  BindPolicy bind = BindPolicy::Auto;  // which cores each child may run on (binding.h)
};

enum class LaunchParse { Run, Help, Error };

// ringcc-run [-n N] [--timeout S] [--grace S] [--bind-to P] [--] program [args...]
LaunchParse parseLaunchArgs(int argc, const char* const* argv, LaunchSpec& spec,
                            std::string& error);
std::string launchUsage();

// Runs the children to completion. `stop`, when non-null and set (by a signal handler), brings
// them down as on a failure, with exit code 128+*stop... callers store the signal number.
int runLaunch(const LaunchSpec& spec, FILE* err, const volatile sig_atomic_t* stop = nullptr);

}  // namespace ringcc::bench
