// Template kernel: data[i] = data[i] * factor for i < n. Each block scales TILE * blockDim.x
// consecutive elements, each thread TILE of them spaced blockDim.x apart (coalesced).
// Declared by an instance, e.g. entry="scale_tiles<16, float>".
// Launch: 1-D, grid ceil(n / (TILE * blockDim.x)).
template <int TILE, typename T>
__global__ void scale_tiles(T *data, T factor, int n) {
  const int base = blockIdx.x * blockDim.x * TILE + threadIdx.x;
#pragma unroll
  for (int k = 0; k < TILE; ++k) {
    const int i = base + k * blockDim.x;
    if (i < n) data[i] = data[i] * factor;
  }
}

// the host side of a real code base launches these instances
template __global__ void scale_tiles<16, float>(float *, float, int);
template __global__ void scale_tiles<4, double>(double *, double, int);
