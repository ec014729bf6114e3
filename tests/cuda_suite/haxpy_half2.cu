// Half precision axpy: y[i] = a * x[i] + y[i] for i < n (x, y arrays of __half, 4-byte
// aligned), two elements at a time with half2 fused multiply-add; an odd last element alone.
// Launch: 1-D, any grid (grid-stride loop).
#include <cuda_fp16.h>

__global__ void haxpy_half2(int n, float a, const __half *x, __half *y) {
  const half2 a2 = __float2half2_rn(a);
  const half2 *x2 = reinterpret_cast<const half2 *>(x);
  half2 *y2 = reinterpret_cast<half2 *>(y);
  const int pairs = n / 2;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < pairs; i += blockDim.x * gridDim.x)
    y2[i] = __hfma2(a2, x2[i], y2[i]);
  if (blockIdx.x == 0 && threadIdx.x == 0 && (n & 1))
    y[n - 1] = __hfma(__float2half(a), x[n - 1], y[n - 1]);
}
