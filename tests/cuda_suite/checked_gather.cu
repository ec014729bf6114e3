// Gather with a checked precondition: out[i] = src[idx[i]] for i < n, asserting that every
// index is in [0, src_len) (a failed assert stops the kernel, as under nvcc).
// Launch: 1-D, grid ceil(n / blockDim.x).
#include <cassert>
#include <cstdint>

__global__ void checked_gather(const float *src, const int32_t *idx, float *out, int64_t n,
                               int32_t src_len) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int32_t j = idx[i];
  assert(j >= 0 && j < src_len);
  out[i] = src[j];
}
