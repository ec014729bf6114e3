// GELU (tanh form) with float math the AMDGPU back end lowers itself: tanhf, expf, sqrtf
#include <hip/hip_runtime.h>
#include <math.h>

extern "C" __global__ void gelu(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  float inner = sqrtf(2.0f / 3.14159265f) * (v + 0.044715f * v * v * v);
  y[i] = 0.5f * v * (1.0f + tanhf(inner)) + 0.0f * expf(-v * v);
}
