// Block-size-templated sum reduction in the style of the classic CUDA samples: each block
// writes the sum of its grid-stride slice of x[0..n) to partial[blockIdx.x]. The block size
// is a template argument so the tree's steps unroll; dynamic shared memory is reached
// through a SharedMemory<T> helper. Declared by an instance, e.g.
// entry="reduce_blocks<float, 256, true>" (true: n is a power of two).
// Launch: block (BLOCK_SIZE), shared = BLOCK_SIZE * sizeof(T) bytes, any grid.
template <class T> struct SharedMemory {
  __device__ inline operator T *() {
    extern __shared__ int shared_words[];
    return reinterpret_cast<T *>(shared_words);
  }
};

// the last warp's steps, ordered by __syncwarp (lanes of a warp need not run in lockstep)
template <class T, unsigned int BLOCK_SIZE>
__device__ void warp_reduce(volatile T *sdata, unsigned int tid) {
  T sum = sdata[tid];
#pragma unroll
  for (unsigned int offset = 32; offset > 0; offset >>= 1) {
    if (BLOCK_SIZE >= 2 * offset) sum += sdata[tid + offset];
    __syncwarp();
    sdata[tid] = sum;
    __syncwarp();
  }
}

template <class T, unsigned int BLOCK_SIZE, bool N_IS_POW2>
__global__ void reduce_blocks(const T *x, T *partial, unsigned int n) {
  T *sdata = SharedMemory<T>();
  const unsigned int tid = threadIdx.x;
  const unsigned int grid_size = BLOCK_SIZE * 2 * gridDim.x;
  unsigned int i = blockIdx.x * BLOCK_SIZE * 2 + threadIdx.x;
  T sum = 0;
  while (i < n) {
    sum += x[i];
    if (N_IS_POW2 || i + BLOCK_SIZE < n) sum += x[i + BLOCK_SIZE];
    i += grid_size;
  }
  sdata[tid] = sum;
  __syncthreads();
  if (BLOCK_SIZE >= 512) { if (tid < 256) sdata[tid] = sum = sum + sdata[tid + 256]; __syncthreads(); }
  if (BLOCK_SIZE >= 256) { if (tid < 128) sdata[tid] = sum = sum + sdata[tid + 128]; __syncthreads(); }
  if (BLOCK_SIZE >= 128) { if (tid < 64) sdata[tid] = sum = sum + sdata[tid + 64]; __syncthreads(); }
  if (tid < 32) warp_reduce<T, BLOCK_SIZE>(sdata, tid);
  if (tid == 0) partial[blockIdx.x] = sdata[0];
}
