// dot product from one source that builds as CUDA (32-lane warps) and as HIP (64-lane
// wavefronts), the single-source style of codes that run on both vendors' GPUs
#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__)
#include <hip/hip_runtime.h>
#define WARP 64
#define SHFL_DOWN(v, offset) __shfl_down(v, offset)
#else
#include <cuda_runtime.h>
#define WARP 32
#define SHFL_DOWN(v, offset) __shfl_down_sync(0xffffffffu, v, offset)
#endif

extern "C" __global__ void dot(const float *x, const float *y, float *result, int n) {
  float v = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    v += x[i] * y[i];
  for (int offset = WARP / 2; offset > 0; offset /= 2) v += SHFL_DOWN(v, offset);
  if (threadIdx.x % WARP == 0) atomicAdd(result, v);
}
