// Half precision bias + ReLU + convert back to float: for i < rows * cols (row-major),
// h = x[i] + bias[i % cols] in __half arithmetic, y[i] = max(h, 0) as __half, and
// y_float[i] = __half2float of it. Launch: 1-D, grid ceil(rows * cols / blockDim.x).
#include <cuda_fp16.h>

__global__ void half_bias_relu(const __half *x, const __half *bias, __half *y, float *y_float,
                               int rows, int cols) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  __half h = __hadd(x[i], bias[i % cols]);
  const __half zero = __float2half(0.0f);
  h = __hgt(h, zero) ? h : zero;
  y[i] = h;
  y_float[i] = __half2float(h);
}
