// Reverses each block-sized segment of data in place through dynamic shared memory:
// for a segment starting at s = blockIdx.x * blockDim.x of length m = min(blockDim.x, n - s),
// data[s + t] becomes the old data[s + m - 1 - t]. Launch: 1-D, shared = blockDim.x * 4 bytes.
extern "C" __global__ void reverse_segments(int *data, int n) {
  extern __shared__ int segment[];
  const int start = blockIdx.x * blockDim.x;
  const int length = min((int)blockDim.x, n - start);
  const int t = threadIdx.x;
  if (t < length) segment[t] = data[start + t];
  __syncthreads();
  if (t < length) data[start + t] = segment[length - 1 - t];
}
