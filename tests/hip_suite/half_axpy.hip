// y = a * x + y in half precision (hip_fp16.h's __half, fused through __hfma)
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>

extern "C" __global__ void half_axpy(int n, float a, const __half *x, __half *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __hfma(__float2half(a), x[i], y[i]);
}
