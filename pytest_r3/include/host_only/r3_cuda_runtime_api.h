/* pytest-r3: declarations of the CUDA runtime API for the host code beside kernels.
 *
 * pytest-r3 builds one kernel of a .cu file, and sets aside the host code that kernel does
 * not reach; what stays (globals, a header's helpers) still has to parse, so the names
 * host code uses are declared here, for the device build and for emulation alike, and are
 * never defined or called. Written for pytest-r3 from the documented API, not a copy of
 * NVIDIA's headers: only what host code commonly names. The including header has defined
 * __host__ and dim3 first.
 */
#ifndef R3_CUDA_RUNTIME_API_DECLARATIONS_H
#define R3_CUDA_RUNTIME_API_DECLARATIONS_H
#include <stddef.h>
#include <stdlib.h>

typedef enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorLaunchFailure = 719,
  cudaErrorUnknown = 999
} cudaError_t;
typedef enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
} cudaMemcpyKind;
typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
#pragma push_macro("warpSize")
#undef warpSize
struct cudaDeviceProp {
  char name[256];
  char uuid[16];
  size_t totalGlobalMem, sharedMemPerBlock, totalConstMem, memPitch, textureAlignment;
  size_t sharedMemPerMultiprocessor, sharedMemPerBlockOptin;
  int regsPerBlock, warpSize, maxThreadsPerBlock, maxThreadsDim[3], maxGridSize[3];
  int clockRate, major, minor, multiProcessorCount, memoryClockRate, memoryBusWidth;
  int l2CacheSize, persistingL2CacheMaxSize, maxThreadsPerMultiProcessor, regsPerMultiprocessor;
  int maxBlocksPerMultiProcessor, deviceOverlap, asyncEngineCount, kernelExecTimeoutEnabled;
  int integrated, canMapHostMemory, computeMode, concurrentKernels, ECCEnabled, pciBusID;
  int pciDeviceID, pciDomainID, tccDriver, unifiedAddressing, managedMemory, isMultiGpuBoard;
  int cooperativeLaunch, cooperativeMultiDeviceLaunch, pageableMemoryAccess;
  int concurrentManagedAccess, computePreemptionSupported, accessPolicyMaxWindowSize;
};
#pragma pop_macro("warpSize")
typedef struct cudaDeviceProp cudaDeviceProp;

__host__ cudaError_t cudaMalloc(void **pointer, size_t bytes);
__host__ cudaError_t cudaMallocManaged(void **pointer, size_t bytes, unsigned int flags = 1);
__host__ cudaError_t cudaMallocHost(void **pointer, size_t bytes);
__host__ cudaError_t cudaFree(void *pointer);
__host__ cudaError_t cudaFreeHost(void *pointer);
__host__ cudaError_t cudaMemcpy(void *to, const void *from, size_t bytes, cudaMemcpyKind kind);
__host__ cudaError_t cudaMemcpyAsync(void *to, const void *from, size_t bytes,
                                     cudaMemcpyKind kind, cudaStream_t stream = 0);
__host__ cudaError_t cudaMemset(void *pointer, int value, size_t bytes);
__host__ cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *from, size_t bytes,
                                        size_t offset = 0,
                                        cudaMemcpyKind kind = cudaMemcpyHostToDevice);
__host__ cudaError_t cudaDeviceSynchronize(void);
__host__ cudaError_t cudaThreadSynchronize(void);
__host__ cudaError_t cudaDeviceReset(void);
__host__ cudaError_t cudaSetDevice(int device);
__host__ cudaError_t cudaGetDevice(int *device);
__host__ cudaError_t cudaGetDeviceCount(int *count);
__host__ cudaError_t cudaGetDeviceProperties(cudaDeviceProp *properties, int device);
__host__ cudaError_t cudaGetLastError(void);
__host__ cudaError_t cudaPeekAtLastError(void);
__host__ const char *cudaGetErrorString(cudaError_t error);
__host__ const char *cudaGetErrorName(cudaError_t error);
__host__ cudaError_t cudaStreamCreate(cudaStream_t *stream);
__host__ cudaError_t cudaStreamDestroy(cudaStream_t stream);
__host__ cudaError_t cudaStreamSynchronize(cudaStream_t stream);
__host__ cudaError_t cudaEventCreate(cudaEvent_t *event);
__host__ cudaError_t cudaEventDestroy(cudaEvent_t event);
__host__ cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = 0);
__host__ cudaError_t cudaEventSynchronize(cudaEvent_t event);
__host__ cudaError_t cudaEventElapsedTime(float *milliseconds, cudaEvent_t start,
                                          cudaEvent_t end);
__host__ cudaError_t cudaEventQuery(cudaEvent_t event);
__host__ cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags);
__host__ cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags);
__host__ cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                         unsigned int flags = 0);
__host__ cudaError_t cudaMemsetAsync(void *pointer, int value, size_t bytes,
                                     cudaStream_t stream = 0);
__host__ cudaError_t cudaMemcpy2D(void *to, size_t to_pitch, const void *from,
                                  size_t from_pitch, size_t width, size_t height,
                                  cudaMemcpyKind kind);
__host__ cudaError_t cudaMallocPitch(void **pointer, size_t *pitch, size_t width,
                                     size_t height);
__host__ cudaError_t cudaHostAlloc(void **pointer, size_t bytes, unsigned int flags);
__host__ cudaError_t cudaHostGetDevicePointer(void **device, void *host, unsigned int flags);
__host__ cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
__host__ cudaError_t cudaMemPrefetchAsync(const void *pointer, size_t bytes, int device,
                                          cudaStream_t stream = 0);
__host__ cudaError_t cudaMemcpyFromSymbol(void *to, const void *symbol, size_t bytes,
                                          size_t offset = 0,
                                          cudaMemcpyKind kind = cudaMemcpyDeviceToHost);
__host__ cudaError_t cudaDeviceGetAttribute(int *value, int attribute, int device);
__host__ cudaError_t cudaDeviceSetLimit(int limit, size_t value);
__host__ cudaError_t cudaSetDeviceFlags(unsigned int flags);
__host__ cudaError_t cudaFuncSetAttribute(const void *function, int attribute, int value);
__host__ cudaError_t cudaFuncSetCacheConfig(const void *function, int config);
__host__ cudaError_t cudaDeviceSetCacheConfig(int config);
__host__ cudaError_t cudaDeviceSetSharedMemConfig(int config);
__host__ cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(
    int *blocks, const void *function, int block_size, size_t shared);
__host__ cudaError_t cudaOccupancyMaxPotentialBlockSize(int *grid, int *block,
                                                        const void *function,
                                                        size_t shared = 0, int limit = 0);
__host__ cudaError_t cudaLaunchCooperativeKernel(const void *function, dim3 grid,
                                                 dim3 block, void **arguments,
                                                 size_t shared = 0, cudaStream_t stream = 0);
__host__ cudaError_t cudaDriverGetVersion(int *version);
__host__ cudaError_t cudaRuntimeGetVersion(int *version);
__host__ cudaError_t cudaProfilerStart(void);
__host__ cudaError_t cudaProfilerStop(void);
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02
#define cudaHostAllocDefault 0x00
#define cudaHostAllocMapped 0x02
#define cudaDeviceScheduleBlockingSync 0x04
#define cudaDeviceMapHost 0x08
#define cudaMemAttachGlobal 0x01
#define cudaCpuDeviceId (-1)
enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
  cudaFuncAttributePreferredSharedMemoryCarveout = 9
};
enum cudaFuncCache {
  cudaFuncCachePreferNone = 0, cudaFuncCachePreferShared = 1, cudaFuncCachePreferL1 = 2,
  cudaFuncCachePreferEqual = 3
};
enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1, cudaDevAttrMaxSharedMemoryPerBlock = 8,
  cudaDevAttrClockRate = 13, cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrComputeMode = 20, cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76, cudaDevAttrMaxSharedMemoryPerBlockOptin = 97
};
enum cudaComputeMode {
  cudaComputeModeDefault = 0, cudaComputeModeExclusive = 1, cudaComputeModeProhibited = 2,
  cudaComputeModeExclusiveProcess = 3
};

/* typed forms, as C++ callers use them (cudaMalloc(&d_a, n)) */
template <class T> __host__ cudaError_t cudaMalloc(T **pointer, size_t bytes) {
  return cudaMalloc((void **)pointer, bytes);
}
template <class T>
__host__ cudaError_t cudaMallocManaged(T **pointer, size_t bytes, unsigned int flags = 1) {
  return cudaMallocManaged((void **)pointer, bytes, flags);
}
template <class T> __host__ cudaError_t cudaMallocHost(T **pointer, size_t bytes) {
  return cudaMallocHost((void **)pointer, bytes);
}
template <class T>
__host__ cudaError_t cudaMemcpyToSymbol(const T &symbol, const void *from, size_t bytes,
                                        size_t offset = 0,
                                        cudaMemcpyKind kind = cudaMemcpyHostToDevice) {
  return cudaMemcpyToSymbol((const void *)&symbol, from, bytes, offset, kind);
}

/* what clang needs to parse kernel<<<grid, block>>>(...) in host code (the call it uses
   depends on the CUDA version it assumes) */
__host__ cudaError_t cudaConfigureCall(dim3 grid, dim3 block, size_t shared = 0,
                                       cudaStream_t stream = 0);
extern "C" __host__ unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block,
                                                        size_t shared = 0,
                                                        cudaStream_t stream = 0);
extern "C" __host__ cudaError_t cudaLaunchKernel(const void *function, dim3 grid, dim3 block,
                                                 void **arguments, size_t shared,
                                                 cudaStream_t stream);
/* the forms that take a kernel itself, as CUDA's templates do */
template <class T>
__host__ cudaError_t cudaFuncSetAttribute(T *function, int attribute, int value) {
  return cudaFuncSetAttribute((const void *)function, attribute, value);
}
template <class T> __host__ cudaError_t cudaFuncSetCacheConfig(T *function, int config) {
  return cudaFuncSetCacheConfig((const void *)function, config);
}
template <class T>
__host__ cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, T function,
                                                                   int block_size,
                                                                   size_t shared) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, (const void *)function,
                                                       block_size, shared);
}
template <class T>
__host__ cudaError_t cudaOccupancyMaxPotentialBlockSize(int *grid, int *block, T function,
                                                        size_t shared = 0, int limit = 0) {
  return cudaOccupancyMaxPotentialBlockSize(grid, block, (const void *)function, shared,
                                            limit);
}
template <class T>
__host__ cudaError_t cudaLaunchCooperativeKernel(T *function, dim3 grid, dim3 block,
                                                 void **arguments, size_t shared = 0,
                                                 cudaStream_t stream = 0) {
  return cudaLaunchCooperativeKernel((const void *)function, grid, block, arguments, shared,
                                     stream);
}
#endif
