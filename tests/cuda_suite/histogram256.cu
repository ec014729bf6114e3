// 256-bin histogram of bytes: counts[b] += number of i < n with data[i] == b (the caller
// zeroes counts). Each block builds a private histogram in shared memory with atomicAdd,
// then adds it to the global one. Launch: any grid, any block size.
#define NUM_BINS 256

extern "C" __global__ void histogram256(const unsigned char *data, unsigned int *counts,
                                        int n) {
  __shared__ unsigned int local[NUM_BINS];
  for (int b = threadIdx.x; b < NUM_BINS; b += blockDim.x) local[b] = 0;
  __syncthreads();
  int stride = blockDim.x * gridDim.x;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    atomicAdd(&local[data[i]], 1u);
  __syncthreads();
  for (int b = threadIdx.x; b < NUM_BINS; b += blockDim.x)
    if (local[b]) atomicAdd(&counts[b], local[b]);
}
