// ABI facts of one nccl.h; declared for both instantiations (see abi_table.inc).
#pragma once

namespace abi {
struct Value {
  const char* name;
  long long value;
};
}  // namespace abi

#define ABI_DECLARE(ns)                                                       \
  namespace ns {                                                              \
  using abi::Value;                                                           \
  extern const Value kEnums[];                                                \
  extern const int kNumEnums;                                                 \
  extern const Value kConfigOffsets[];                                        \
  extern const int kNumConfigOffsets;                                         \
  long long configSize();                                                 \
  void configInitializer(unsigned char* out, unsigned long long cap);     \
  void collConfigInitializer(unsigned char* out, unsigned long long cap); \
  void otherInitializers(long long* out, int n);                           \
  }

ABI_DECLARE(abi_real)
ABI_DECLARE(abi_ours)
