// Replaces non-finite values: out[i] = isnan(x) ? nan_value : isinf(x) ? copysignf(big, x) : x
// for x = in[i], i < n, and counts the replaced values in *replaced (zeroed by the caller)
// with atomicAdd_block per block into shared memory, then one atomicAdd per block.
// Launch: 1-D, grid ceil(n / blockDim.x).
#include <cmath>
#include <cfloat>

__global__ void nan_filter(const float *in, float *out, float nan_value, float big,
                           unsigned int *replaced, int n) {
  __shared__ unsigned int block_count;
  if (threadIdx.x == 0) block_count = 0;
  __syncthreads();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float x = in[i];
    if (isnan(x)) {
      x = nan_value;
      atomicAdd_block(&block_count, 1u);
    } else if (isinf(x)) {
      x = copysignf(big, x);
      atomicAdd_block(&block_count, 1u);
    }
    out[i] = x;
  }
  __syncthreads();
  if (threadIdx.x == 0 && block_count) atomicAdd(replaced, block_count);
}
