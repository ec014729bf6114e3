// Maximum and sum by compare-and-swap loops, as code written before native atomics:
// *max_out = max(*max_out, max_i x[i]) through a 32-bit atomicCAS on the float's bits, and
// *sum_out += sum_i x[i] in double precision through a 64-bit atomicCAS on the bits.
// Launch: 1-D, grid ceil(n / blockDim.x).
__device__ float atomic_max_float(float *address, float value) {
  int *bits = reinterpret_cast<int *>(address);
  int old = *bits, assumed;
  do {
    assumed = old;
    if (__int_as_float(assumed) >= value) break;
    old = atomicCAS(bits, assumed, __float_as_int(value));
  } while (assumed != old);
  return __int_as_float(old);
}

__device__ double atomic_add_double(double *address, double value) {
  unsigned long long *bits = reinterpret_cast<unsigned long long *>(address);
  unsigned long long old = *bits, assumed;
  do {
    assumed = old;
    old = atomicCAS(bits, assumed,
                    __double_as_longlong(value + __longlong_as_double(assumed)));
  } while (assumed != old);
  return __longlong_as_double(old);
}

__global__ void max_and_sum(const float *x, float *max_out, double *sum_out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  atomic_max_float(max_out, x[i]);
  atomic_add_double(sum_out, (double)x[i]);
}
