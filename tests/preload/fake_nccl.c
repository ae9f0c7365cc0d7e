/* A library that answers ncclGetVersion like NVIDIA's NCCL 2.28 and nothing else: "another
 * NCCL". The Python package must refuse it (tests/torch/test_library.py), and the loader must
 * pick it or ringcc as tests/preload/test_preload.sh expects. */
__attribute__((visibility("default"))) int ncclGetVersion(int* version) {
  *version = 22800;
  return 0;
}
