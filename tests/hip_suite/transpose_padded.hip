// out = in^T through a shared tile padded by one column (no LDS bank conflicts)
#include <hip/hip_runtime.h>
#define T 32
#define ROWS 8

extern "C" __global__ void transpose(int rows, int cols, const float *in, float *out) {
  __shared__ float tile[T][T + 1];
  int x = blockIdx.x * T + threadIdx.x, y = blockIdx.y * T + threadIdx.y;
  for (int j = 0; j < T; j += ROWS)
    if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
  __syncthreads();
  x = blockIdx.y * T + threadIdx.x;
  y = blockIdx.x * T + threadIdx.y;
  for (int j = 0; j < T; j += ROWS)
    if (x < rows && y + j < cols) out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}
