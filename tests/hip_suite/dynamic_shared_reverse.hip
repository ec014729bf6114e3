// reverses each block's slice through dynamic shared memory (HIP_DYNAMIC_SHARED)
#include <hip/hip_runtime.h>

extern "C" __global__ void reverse_blocks(const int *in, int *out) {
  HIP_DYNAMIC_SHARED(int, buffer)
  int base = blockIdx.x * blockDim.x;
  buffer[threadIdx.x] = in[base + threadIdx.x];
  __syncthreads();
  out[base + threadIdx.x] = buffer[blockDim.x - 1 - threadIdx.x];
}
