// C = A * B for row-major A (m x k), B (k x n), C (m x n), single precision, through
// TILE x TILE shared-memory tiles. Launch: block (TILE, TILE), grid (ceil(n/TILE), ceil(m/TILE)).
#ifndef TILE
#define TILE 16
#endif

extern "C" __global__ void sgemm_tiled(int m, int n, int k, const float *A, const float *B,
                                       float *C) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  const int row = blockIdx.y * TILE + threadIdx.y;
  const int col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (int t = 0; t < k; t += TILE) {
    As[threadIdx.y][threadIdx.x] = row < m && t + threadIdx.x < k ? A[row * k + t + threadIdx.x] : 0.0f;
    Bs[threadIdx.y][threadIdx.x] = col < n && t + threadIdx.y < k ? B[(t + threadIdx.y) * n + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int e = 0; e < TILE; ++e) acc += As[threadIdx.y][e] * Bs[e][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) C[row * n + col] = acc;
}
