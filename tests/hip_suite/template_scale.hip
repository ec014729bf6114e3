// out = in * factor, each thread doing ITEMS elements: a template kernel declared by its
// instance (entry="scale_items<4, float>")
#include <hip/hip_runtime.h>

template <int ITEMS, typename T>
__global__ void scale_items(const T *in, T *out, T factor, int n) {
  int first = (blockIdx.x * blockDim.x + threadIdx.x) * ITEMS;
#pragma unroll
  for (int j = 0; j < ITEMS; ++j)
    if (first + j < n) out[first + j] = in[first + j] * factor;
}

template __global__ void scale_items<4, float>(const float *, float *, float, int);
