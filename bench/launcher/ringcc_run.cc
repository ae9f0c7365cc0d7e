// ringcc-run: starts N local processes of a program as one ringcc job (see launcher.h).
//
// It takes the unique id from the library's own ncclGetUniqueId, which starts the bootstrap
// root listener inside this process; so ringcc-run stays alive until every child is done.
#include <csignal>
#include <cstdio>
#include <string>

#include "bench/launcher/launch_protocol.h"
#include "bench/launcher/launcher.h"
#include "nccl.h"

// The library may not have every entry point yet; a missing one is a clear error, not a
// failed link.
#pragma weak ncclGetUniqueId
#pragma weak ncclGetErrorString

namespace {
volatile sig_atomic_t g_stop = 0;
void onSignal(int sig) { g_stop = sig; }
}  // namespace

int main(int argc, char** argv) {
  using namespace ringcc::bench;
  LaunchSpec spec;
  std::string error;
  switch (parseLaunchArgs(argc, argv, spec, error)) {
    case LaunchParse::Help: std::fputs(launchUsage().c_str(), stdout); return 0;
    case LaunchParse::Error:
      std::fprintf(stderr, "ringcc-run: %s\n", error.c_str());
      return 2;
    case LaunchParse::Run: break;
  }
  if (!ncclGetUniqueId) {
    std::fprintf(stderr, "ringcc-run: libnccl.so.2 does not provide ncclGetUniqueId\n");
    return 1;
  }
  ncclUniqueId id;
  ncclResult_t rc = ncclGetUniqueId(&id);
  if (rc != ncclSuccess) {
    std::fprintf(stderr, "ringcc-run: ncclGetUniqueId failed: %s\n",
                 ncclGetErrorString ? ncclGetErrorString(rc) : "error");
    return 1;
  }
  spec.uniqueIdHex = uniqueIdToHex(id);

  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  return runLaunch(spec, stderr, &g_stop);
}
