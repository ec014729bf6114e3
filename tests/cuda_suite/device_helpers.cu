// Elementwise tone mapping through small __device__ helpers:
// out[i] = smoothstep(0, 1, clamp(lerp(lo, hi, in[i]) * gain, 0, 1)) for i < n.
// Launch: 1-D, grid ceil(n / blockDim.x).
__device__ __forceinline__ float clampf(float v, float lo, float hi) {
  return fminf(fmaxf(v, lo), hi);
}

__device__ __forceinline__ float lerpf(float a, float b, float t) { return fmaf(t, b - a, a); }

__device__ float smoothstepf(float edge0, float edge1, float x) {
  float t = clampf((x - edge0) / (edge1 - edge0), 0.0f, 1.0f);
  return t * t * (3.0f - 2.0f * t);
}

__global__ void tone_map(const float *in, float *out, float lo, float hi, float gain, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = clampf(lerpf(lo, hi, in[i]) * gain, 0.0f, 1.0f);
  out[i] = smoothstepf(0.0f, 1.0f, v);
}
