// Double precision dot product: *result += sum_i a[i] * b[i] (result zeroed by the caller),
// grid-stride partial sums, butterfly warp reduction with __shfl_xor_sync on doubles, one
// atomicAdd(double) per warp. Launch: 1-D, blockDim.x a multiple of 32, any grid.
__global__ void ddot(const double *a, const double *b, double *result, int n) {
  double sum = 0.0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    sum = fma(a[i], b[i], sum);
  for (int offset = 16; offset > 0; offset /= 2)
    sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if ((threadIdx.x & 31) == 0) atomicAdd(result, sum);
}
