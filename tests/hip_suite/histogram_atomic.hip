// 64-bin histogram of bytes: atomics on a shared histogram, then one atomicAdd per bin
#include <hip/hip_runtime.h>
#define BINS 64

extern "C" __global__ void histogram(const unsigned char *data, unsigned int *bins, int n) {
  __shared__ unsigned int local[BINS];
  for (int b = threadIdx.x; b < BINS; b += blockDim.x) local[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    atomicAdd(&local[data[i] % BINS], 1u);
  __syncthreads();
  for (int b = threadIdx.x; b < BINS; b += blockDim.x)
    if (local[b]) atomicAdd(&bins[b], local[b]);
}
