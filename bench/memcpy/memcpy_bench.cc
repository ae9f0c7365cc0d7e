// memcpy_bench: one thread's memcpy bandwidth on this machine, the ceiling a host collective
// is measured against (every ring step is at least one copy of its bytes).
//
//   memcpy_bench [maxBytes=256M] [iters=20]
//
// For sizes from 64 KiB to maxBytes (x4), prints the best and median time of `iters` copies
// and the bandwidth (bytes / time, GB/s) of the median.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  size_t maxBytes = argc > 1 ? std::strtoull(argv[1], nullptr, 0) : (size_t{256} << 20);
  int iters = argc > 2 ? std::atoi(argv[2]) : 20;
  if (maxBytes < 65536 || iters < 1) {
    fprintf(stderr, "usage: memcpy_bench [maxBytes >= 65536] [iters >= 1]\n");
    return 2;
  }
  std::vector<char> src(maxBytes, 1), dst(maxBytes, 2);
  printf("# memcpy_bench: one thread, median of %d copies\n", iters);
  printf("# %12s %12s %12s %10s\n", "bytes", "best (us)", "median (us)", "GB/s");
  for (size_t bytes = 65536; bytes <= maxBytes; bytes *= 4) {
    std::vector<double> us;
    for (int i = 0; i < iters + 1; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      std::memcpy(dst.data(), src.data(), bytes);
      auto t1 = std::chrono::steady_clock::now();
      if (i > 0) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    std::sort(us.begin(), us.end());
    double median = us[us.size() / 2];
    printf("  %12zu %12.2f %12.2f %10.2f\n", bytes, us.front(), median, bytes / median / 1e3);
  }
  return dst[maxBytes - 1] == 1 ? 0 : 1;
}
