/* A library that answers ncclGetVersion like NVIDIA's NCCL 2.28 and nothing else: the Python
 * package, pointed at it through RINGCC_LIB, must refuse it (tests/torch/test_library.py, tests/preload/test_preload.sh). */
__attribute__((visibility("default"))) int ncclGetVersion(int* version) {
  *version = 22800;
  return 0;
}
