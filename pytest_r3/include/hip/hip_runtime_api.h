/* <hip/hip_runtime_api.h> for pytest-r3: declarations of the HIP runtime API for the host
 * code beside kernels, for the AMDGCN device build and for HIP emulation alike.
 *
 * pytest-r3 builds one kernel of a .hip file and sets aside the host code that kernel does
 * not reach; what stays (globals, a header's helpers) still has to parse, so the names host
 * code commonly uses are declared here, never defined or called. Written for pytest-r3
 * from the documented API, not a copy of AMD's headers. */
#ifndef R3_HIP_RUNTIME_API_H
#define R3_HIP_RUNTIME_API_H
#include <stddef.h>

typedef enum hipError_t {
  hipSuccess = 0,
  hipErrorInvalidValue = 1,
  hipErrorOutOfMemory = 2,
  hipErrorNotInitialized = 3,
  hipErrorLaunchFailure = 719,
  hipErrorUnknown = 999
} hipError_t;
typedef enum hipMemcpyKind {
  hipMemcpyHostToHost = 0,
  hipMemcpyHostToDevice = 1,
  hipMemcpyDeviceToHost = 2,
  hipMemcpyDeviceToDevice = 3,
  hipMemcpyDefault = 4
} hipMemcpyKind;
typedef struct ihipStream_t *hipStream_t;
typedef struct ihipEvent_t *hipEvent_t;
typedef struct ihipModule_t *hipModule_t;
typedef struct ihipModuleSymbol_t *hipFunction_t;
typedef int hipDevice_t;
#pragma push_macro("warpSize")
#undef warpSize
typedef struct hipDeviceProp_t {
  char name[256];
  size_t totalGlobalMem, sharedMemPerBlock, totalConstMem;
  int regsPerBlock, warpSize, maxThreadsPerBlock, maxThreadsDim[3], maxGridSize[3];
  int clockRate, major, minor, multiProcessorCount, l2CacheSize;
  int maxThreadsPerMultiProcessor, computeMode, concurrentKernels, pciBusID, pciDeviceID;
  char gcnArchName[256];
} hipDeviceProp_t;
#pragma pop_macro("warpSize")

hipError_t hipMalloc(void **pointer, size_t bytes);
hipError_t hipMallocManaged(void **pointer, size_t bytes, unsigned int flags = 1);
hipError_t hipHostMalloc(void **pointer, size_t bytes, unsigned int flags = 0);
hipError_t hipFree(void *pointer);
hipError_t hipHostFree(void *pointer);
hipError_t hipMemcpy(void *to, const void *from, size_t bytes, hipMemcpyKind kind);
hipError_t hipMemcpyAsync(void *to, const void *from, size_t bytes, hipMemcpyKind kind,
                          hipStream_t stream = 0);
hipError_t hipMemset(void *pointer, int value, size_t bytes);
hipError_t hipMemcpyToSymbol(const void *symbol, const void *from, size_t bytes,
                             size_t offset = 0, hipMemcpyKind kind = hipMemcpyHostToDevice);
hipError_t hipDeviceSynchronize(void);
hipError_t hipDeviceReset(void);
hipError_t hipGetLastError(void);
hipError_t hipPeekAtLastError(void);
const char *hipGetErrorString(hipError_t error);
const char *hipGetErrorName(hipError_t error);
hipError_t hipGetDeviceCount(int *count);
hipError_t hipSetDevice(int device);
hipError_t hipGetDevice(int *device);
hipError_t hipGetDeviceProperties(hipDeviceProp_t *properties, int device);
hipError_t hipStreamCreate(hipStream_t *stream);
hipError_t hipStreamDestroy(hipStream_t stream);
hipError_t hipStreamSynchronize(hipStream_t stream);
hipError_t hipEventCreate(hipEvent_t *event);
hipError_t hipEventDestroy(hipEvent_t event);
hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream = 0);
hipError_t hipEventSynchronize(hipEvent_t event);
hipError_t hipEventElapsedTime(float *milliseconds, hipEvent_t start, hipEvent_t stop);

/* hipLaunchKernelGGL(kernel, grid, block, shared, stream, args...) as hipcc reads it; it
 * appears only in host code, which pytest-r3 never builds */
#define hipLaunchKernelGGL(kernel, grid, block, shared, stream, ...)                       \
  kernel<<<(grid), (block), (shared), (stream)>>>(__VA_ARGS__)
#define HIP_KERNEL_NAME(...) __VA_ARGS__
#endif
