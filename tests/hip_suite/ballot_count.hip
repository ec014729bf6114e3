// how many x are positive: a 64-bit __ballot per wavefront, __popcll, one atomic per wave
#include <hip/hip_runtime.h>

extern "C" __global__ void count_positive(const float *x, int *count, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned long long votes = __ballot(i < n && x[i] > 0.0f);
  if (__lane_id() == 0) atomicAdd(count, __popcll(votes));
}
