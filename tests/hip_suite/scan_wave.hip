// inclusive prefix sums within each 64-lane wavefront (__shfl_up), as a scan's first level
#include <hip/hip_runtime.h>

extern "C" __global__ void wave_scan(const int *x, int *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = i < n ? x[i] : 0;
  int lane = threadIdx.x % warpSize;
  for (int offset = 1; offset < warpSize; offset *= 2) {
    int other = __shfl_up(v, offset);
    if (lane >= offset) v += other;
  }
  if (i < n) out[i] = v;
}
