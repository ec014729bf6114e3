// Rotates 2-D points by per-point angles: for i < n, with (s, c) = sincos(angle[i]),
// out[i] = (c * p.x - s * p.y, s * p.x + c * p.y) where p = pts[i] (float2 arrays).
// Launch: 1-D, grid ceil(n / blockDim.x).
#include <cmath>

__global__ void rotate_points(const float2 *pts, const float *angle, float2 *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s, c;
  sincosf(angle[i], &s, &c);
  float2 p = pts[i];
  out[i] = make_float2(c * p.x - s * p.y, s * p.x + c * p.y);
}
