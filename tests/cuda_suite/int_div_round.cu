// Integer and rounding intrinsics, elementwise for i < n:
// hi[i] = __umulhi(a[i], b[i]), avg[i] = __hadd(a[i], b[i]) (signed average rounded down),
// q[i] = __float2int_rn(__fdividef(x[i], y[i])), r[i] = __frcp_rn(y[i]) + __fmul_rn(x[i], y[i]).
// Launch: 1-D, grid ceil(n / blockDim.x).
__global__ void int_div_round(const unsigned int *a, const unsigned int *b, const float *x,
                              const float *y, unsigned int *hi, int *avg, int *q, float *r,
                              int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  hi[i] = __umulhi(a[i], b[i]);
  avg[i] = __hadd((int)a[i], (int)b[i]);
  q[i] = __float2int_rn(__fdividef(x[i], y[i]));
  r[i] = __frcp_rn(y[i]) + __fmul_rn(x[i], y[i]);
}
