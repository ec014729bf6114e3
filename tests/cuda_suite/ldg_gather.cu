// Weighted gather through the read-only cache: out[i] = table[index[i]] * weight[i] for
// i < n (every index[i] in [0, table_size)). __ldg without __restrict__.
// Launch: 1-D, grid ceil(n / blockDim.x).
__global__ void ldg_gather(const float *table, const int *index, const float *weight,
                           float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __ldg(&table[__ldg(&index[i])]) * __ldg(weight + i);
}
