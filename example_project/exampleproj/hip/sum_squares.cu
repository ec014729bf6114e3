/* result += the sum of x[i]^2, from one source that builds as CUDA (32-lane warps,
 * backend="cuda") and as HIP (64-lane wavefronts, backend="hip"): the single-source style
 * of codes that run on both vendors' GPUs. Each warp reduces with a shuffle and adds its
 * sum atomically. */
#if defined(__HIP_PLATFORM_AMD__)
#include <hip/hip_runtime.h>
#define WARP 64
#define SHFL_DOWN(v, offset) __shfl_down(v, offset)
#else
#include <cuda_runtime.h>
#define WARP 32
#define SHFL_DOWN(v, offset) __shfl_down_sync(0xffffffffu, v, offset)
#endif
#ifndef BLOCK
#define BLOCK 256
#endif

extern "C" __global__ void sum_squares(int n, const float *x, float *result) {
  float v = 0.0f;
  for (int i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += gridDim.x * BLOCK)
    v += x[i] * x[i];
  for (int offset = WARP / 2; offset > 0; offset /= 2) v += SHFL_DOWN(v, offset);
  if (threadIdx.x % WARP == 0) atomicAdd(result, v);
}
