// sum of x: each 64-lane wavefront reduces with __shfl_down, lane 0 adds its sum atomically
#include <hip/hip_runtime.h>

__device__ float wave_sum(float v) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2) v += __shfl_down(v, offset);
  return v;
}

extern "C" __global__ void wave_reduce(const float *x, float *total, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = wave_sum(i < n ? x[i] : 0.0f);
  if (__lane_id() == 0) atomicAdd(total, v);
}
