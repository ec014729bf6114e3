// per-block sums of x by a tree in shared memory (__syncthreads between levels)
#include <hip/hip_runtime.h>
#ifndef BLOCK
#define BLOCK 256
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
block_reduce(const double *x, double *sums, int n) {
  __shared__ double partial[BLOCK];
  int i = blockIdx.x * BLOCK + threadIdx.x;
  partial[threadIdx.x] = i < n ? x[i] : 0.0;
  __syncthreads();
  for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) sums[blockIdx.x] = partial[0];
}
