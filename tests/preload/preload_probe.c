/* Prints the ncclGetVersion of whichever libnccl.so.2 the loader gave this program
 * (tests/preload/test_preload.sh links it with an old-style RPATH, as PyTorch's pip wheels are). */
#include <stdio.h>

#include "nccl.h"

int main(void) {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) return 1;
  printf("%d\n", version);
  return 0;
}
