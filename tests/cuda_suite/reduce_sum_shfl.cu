// Sum of x[0..n) into *total (which the caller zeroes): each block reduces a grid-stride
// slice with warp shuffles, one partial per warp in shared memory, then one atomicAdd.
// Launch: any grid, blockDim.x a multiple of 32 and at most 1024.
#include <cstdio>

__inline__ __device__ float warp_reduce_sum(float value) {
  for (int offset = warpSize / 2; offset > 0; offset >>= 1)
    value += __shfl_down_sync(0xffffffffu, value, offset);
  return value;
}

__global__ void reduce_sum(const float *__restrict__ x, float *total, int n) {
  __shared__ float partial[32];
  float sum = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    sum += x[i];
  const int lane = threadIdx.x % warpSize;
  const int warp = threadIdx.x / warpSize;
  sum = warp_reduce_sum(sum);
  if (lane == 0) partial[warp] = sum;
  __syncthreads();
  if (warp == 0) {
    sum = lane < blockDim.x / warpSize ? partial[lane] : 0.0f;
    sum = warp_reduce_sum(sum);
    if (lane == 0) atomicAdd(total, sum);
  }
}
