// ringcc-run: starts N local processes of a program as one ringcc job (see launcher.h).
//
// It takes the unique id from the library's own ncclGetUniqueId, which starts the bootstrap
// root listener inside this process; so ringcc-run stays alive until every child is done.
#include <dlfcn.h>

#include <csignal>
#include <cstdio>
#include <string>

#include "bench/launcher/launch_protocol.h"
#include "bench/launcher/launcher.h"
#include "nccl.h"

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
  // Looked up at run time (like the perf tools' entry points): a library without it yet is a
  // clear error, not a failed link.
  auto getUniqueId =
      reinterpret_cast<ncclResult_t (*)(ncclUniqueId*)>(dlsym(RTLD_DEFAULT, "ncclGetUniqueId"));
  auto errorString =
      reinterpret_cast<const char* (*)(ncclResult_t)>(dlsym(RTLD_DEFAULT, "ncclGetErrorString"));
  if (!getUniqueId) {
    std::fprintf(stderr, "ringcc-run: libnccl.so.2 does not provide ncclGetUniqueId\n");
    return 1;
  }
  ncclUniqueId id;
  ncclResult_t rc = getUniqueId(&id);
  if (rc != ncclSuccess) {
    std::fprintf(stderr, "ringcc-run: ncclGetUniqueId failed: %s\n",
                 errorString ? errorString(rc) : "error");
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
