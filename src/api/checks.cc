#include "src/api/api.h"

namespace ringcc {

ncclResult_t checkNotNull(const void* ptr, const char* what, const char* where) {
  if (ptr == nullptr) return fail(ncclInvalidArgument, where, "%s is NULL", what);
  return ncclSuccess;
}

}  // namespace ringcc
