// out[i] = 2 * in[i] for i < n; when verbose is set, thread 0 of block 0 prints n and
// in[0], and any thread that sees a negative input prints its index (device printf).
// Launch: 1-D, grid ceil(n / blockDim.x).
#include <cstdio>

__global__ void double_and_report(const float *in, float *out, int n, int verbose) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (verbose && i == 0) printf("double_and_report: n=%d in[0]=%f\n", n, in[0]);
  if (i >= n) return;
  float v = in[i];
  if (verbose && v < 0.0f) printf("negative input at %d: %f\n", i, v);
  out[i] = 2.0f * v;
}
