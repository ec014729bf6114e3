// A mix of single-precision math functions, elementwise for i < n (x[i] > 0):
// out[i] = sqrtf(x) + rsqrtf(x) + expf(-x) + logf(x) + sinf(x) * cosf(x) + powf(x, 0.75)
//          + tanhf(x - 1) + fabsf(floorf(x) - x) + __expf(-x) * __sinf(x)
// Launch: 1-D, grid ceil(n / blockDim.x).
#include <cmath>

__global__ void math_mix(const float *x, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  float r = sqrtf(v) + rsqrtf(v) + expf(-v) + logf(v);
  r += sinf(v) * cosf(v) + powf(v, 0.75f) + tanhf(v - 1.0f);
  r += fabsf(floorf(v) - v) + __expf(-v) * __sinf(v);
  out[i] = r;
}
