/* sums[r] = the sum of row r of an rows x cols matrix, one block per row. Each thread adds
 * a strided part of the row, each 64-lane wavefront reduces with __shfl_down, and the
 * wavefronts' sums meet in shared memory (LDS). BLOCK is tuned. */
#include <hip/hip_runtime.h>
#ifndef BLOCK
#define BLOCK 256
#endif

__device__ float wavefront_sum(float v) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2) v += __shfl_down(v, offset);
  return v;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
row_sums(int rows, int cols, const float *matrix, float *sums) {
  __shared__ float partial[BLOCK / 64];
  const float *row = matrix + (size_t)blockIdx.x * cols;
  float v = 0.0f;
  for (int c = threadIdx.x; c < cols; c += BLOCK) v += row[c];
  v = wavefront_sum(v);
  if (__lane_id() == 0) partial[threadIdx.x / warpSize] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int w = 0; w < BLOCK / warpSize; ++w) total += partial[w];
    sums[blockIdx.x] = total;
  }
}
