// c = a @ b (row-major, m x k times k x n), TILE x TILE tiles staged in shared memory (LDS)
#include <hip/hip_runtime.h>
#ifndef TILE
#define TILE 16
#endif

extern "C" __global__ void matmul_tiled(int m, int n, int k, const float *a, const float *b,
                                        float *c) {
  __shared__ float a_tile[TILE][TILE];
  __shared__ float b_tile[TILE][TILE];
  int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  float sum = 0.0f;
  for (int t = 0; t < k; t += TILE) {
    a_tile[threadIdx.y][threadIdx.x] =
        row < m && t + threadIdx.x < k ? a[row * k + t + threadIdx.x] : 0.0f;
    b_tile[threadIdx.y][threadIdx.x] =
        col < n && t + threadIdx.y < k ? b[(t + threadIdx.y) * n + col] : 0.0f;
    __syncthreads();
    for (int j = 0; j < TILE; ++j) sum += a_tile[threadIdx.y][j] * b_tile[j][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) c[row * n + col] = sum;
}
