// GELU (tanh approximation) on bfloat16 activations, computed in float:
// y[i] = bf16(0.5 * v * (1 + tanh(0.7978845608 * (v + 0.044715 * v^3)))) with v = float(x[i]),
// two elements at a time through __nv_bfloat162 (x, y 4-byte aligned, n even).
// Launch: 1-D, grid ceil(n / 2 / blockDim.x).
#include <cuda_bf16.h>

__device__ __forceinline__ float gelu(float v) {
  const float k = 0.7978845608f;
  return 0.5f * v * (1.0f + tanhf(k * fmaf(0.044715f * v, v * v, v)));
}

__global__ void gelu_bf16(const __nv_bfloat16 *x, __nv_bfloat16 *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (2 * i >= n) return;
  const __nv_bfloat162 pair = reinterpret_cast<const __nv_bfloat162 *>(x)[i];
  float2 v = __bfloat1622float2(pair);
  reinterpret_cast<__nv_bfloat162 *>(y)[i] = __floats2bfloat162_rn(gelu(v.x), gelu(v.y));
}
