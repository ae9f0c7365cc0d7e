/* A stand-in for libnvidia-ml.so.1, for testing GPU detection on a machine without GPUs.
 * It implements the few NVML entry points src/topo/nvml_probe.cc uses. The GPUs are the bus
 * ids in FAKE_NVML_BUSIDS (comma separated, at most 8); each is an sm90 GPU with 18 active
 * NVLinks spread over four NVSwitch ports 0000:05:00.0 .. 0000:08:00.0 (5, 4, 4, 5 links). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} FakePciInfo;

/* The project builds with -fvisibility=hidden: the entry points must be exported. */
#define EXPORT __attribute__((visibility("default")))

static char g_busIds[8][32];
static unsigned g_count;

EXPORT int nvmlInit_v2(void) {
  const char* list = getenv("FAKE_NVML_BUSIDS");
  g_count = 0;
  while (list && *list && g_count < 8) {
    const char* end = strchr(list, ',');
    size_t n = end ? (size_t)(end - list) : strlen(list);
    if (n >= sizeof(g_busIds[0])) n = sizeof(g_busIds[0]) - 1;
    /* NVML writes an 8-digit domain, upper case: the probe must normalize it. */
    snprintf(g_busIds[g_count], sizeof(g_busIds[0]), "0000%.*s", (int)n, list);
    for (char* c = g_busIds[g_count]; *c; ++c)
      if (*c >= 'a' && *c <= 'f') *c = (char)(*c - 'a' + 'A');
    ++g_count;
    list = end ? end + 1 : NULL;
  }
  return 0;
}

EXPORT int nvmlDeviceGetCount_v2(unsigned* n) {
  *n = g_count;
  return 0;
}

EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** device) {
  if (i >= g_count) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
  *device = (void*)(uintptr_t)(i + 1);
  return 0;
}

EXPORT int nvmlDeviceGetPciInfo_v3(void* device, FakePciInfo* info) {
  memset(info, 0, sizeof(*info));
  snprintf(info->busId, sizeof(info->busId), "%s", g_busIds[(uintptr_t)device - 1]);
  return 0;
}

EXPORT int nvmlDeviceGetCudaComputeCapability(void* device, int* major, int* minor) {
  (void)device;
  *major = 9;
  *minor = 0;
  return 0;
}

EXPORT int nvmlDeviceGetNvLinkState(void* device, unsigned link, int* active) {
  (void)device;
  *active = link < 18;
  return 0;
}

EXPORT int nvmlDeviceGetNvLinkRemotePciInfo_v2(void* device, unsigned link, FakePciInfo* info) {
  (void)device;
  static const int kPort[18] = {0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 3};
  memset(info, 0, sizeof(*info));
  snprintf(info->busId, sizeof(info->busId), "00000000:%02X:00.0", 5 + kPort[link % 18]);
  return 0;
}
