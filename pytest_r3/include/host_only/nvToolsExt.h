/* pytest-r3: declarations of NVTX's ranges and marks (no code), for host code that
 * annotates its timeline. */
#ifndef R3_NVTOOLSEXT_H
#define R3_NVTOOLSEXT_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
typedef uint64_t nvtxRangeId_t;
typedef struct nvtxEventAttributes_v2 {
  uint16_t version, size;
  uint32_t category;
  int32_t colorType;
  uint32_t color;
  int32_t payloadType, reserved0;
  union { uint64_t ullValue; int64_t llValue; double dValue; } payload;
  int32_t messageType;
  union { const char *ascii; const void *unicode; } message;
} nvtxEventAttributes_t;
#define NVTX_VERSION 3
#define NVTX_EVENT_ATTRIB_STRUCT_SIZE ((uint16_t)(sizeof(nvtxEventAttributes_t)))
#define NVTX_COLOR_ARGB 1
#define NVTX_MESSAGE_TYPE_ASCII 1
__host__ int nvtxRangePushA(const char *message);
__host__ int nvtxRangePushEx(const nvtxEventAttributes_t *attributes);
__host__ int nvtxRangePop(void);
__host__ nvtxRangeId_t nvtxRangeStartA(const char *message);
__host__ void nvtxRangeEnd(nvtxRangeId_t id);
__host__ void nvtxMarkA(const char *message);
__host__ void nvtxNameOsThreadA(uint32_t thread, const char *name);
#define nvtxRangePush nvtxRangePushA
#define nvtxRangeStart nvtxRangeStartA
#define nvtxMark nvtxMarkA
#ifdef __cplusplus
}
#endif
#endif
