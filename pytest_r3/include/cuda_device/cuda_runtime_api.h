/* pytest-r3: declarations of the CUDA runtime API for device-only compilation.
 *
 * pytest-r3 compiles only the device side of a .cu file. Its host code (allocation, copies,
 * launches, main) is still parsed, so the names it uses must be declared; nothing here is
 * ever defined or called. Written for pytest-r3 from the documented API, not a copy of
 * NVIDIA's headers: only what host code commonly names, with __host__ declarations.
 */
#ifndef R3_CUDA_STUB_RUNTIME_API_H
#define R3_CUDA_STUB_RUNTIME_API_H
#include <r3_cuda.h>
#include <math.h>
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
  size_t totalGlobalMem, sharedMemPerBlock, totalConstMem;
  int regsPerBlock, warpSize, maxThreadsPerBlock, maxThreadsDim[3], maxGridSize[3];
  int clockRate, major, minor, multiProcessorCount, memoryClockRate, memoryBusWidth;
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
#endif
