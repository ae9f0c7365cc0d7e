#include "support/fake_driver.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace ringcc::test {
namespace {

using InstallFn = void (*)(const CudaDriver*);

[[noreturn]] void cannotFake(const char* why) {
  std::fprintf(stderr, "fake CUDA driver (%s): %s\n", RINGCC_FAKE_LIBCUDA, why);
  std::abort();
}

InstallFn loadStandIn() {
  // Opened as ".../libcuda.so.1": the loader then lists it under that file name, which is how
  // the library under test sees that a driver is loaded (libraryInProcess). The link goes once
  // the library is loaded.
  char dir[] = "/tmp/ringcc-fake-cuda-XXXXXX";
  if (mkdtemp(dir) == nullptr) cannotFake("mkdtemp failed");
  const std::string link = std::string(dir) + "/libcuda.so.1";
  if (symlink(RINGCC_FAKE_LIBCUDA, link.c_str()) != 0) cannotFake("symlink failed");
  void* lib = dlopen(link.c_str(), RTLD_NOW | RTLD_LOCAL);
  const char* err = lib == nullptr ? dlerror() : nullptr;
  unlink(link.c_str());
  rmdir(dir);
  if (lib == nullptr) cannotFake(err);
  // The name the library under test opens must lead to the stand-in, not to a real driver
  // loaded before it (a machine with a GPU, a test that loaded CUDA itself).
  void* byName = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (byName != lib) cannotFake("another libcuda.so.1 is loaded in this process");
  dlclose(byName);
  auto install = reinterpret_cast<InstallFn>(dlsym(lib, "ringccFakeCudaInstall"));
  if (install == nullptr) cannotFake("no ringccFakeCudaInstall in it");
  return install;  // the library stays loaded: its reference is never dropped
}

}  // namespace

void installFakeCudaDriver(const CudaDriver* table) {
  static std::once_flag once;
  static InstallFn install = nullptr;
  std::call_once(once, [] { install = loadStandIn(); });
  install(table);
}

}  // namespace ringcc::test
