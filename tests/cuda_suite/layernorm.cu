// Layer normalisation over the last dimension: for each row r of a rows x cols matrix,
// out[r][c] = (x[r][c] - mean_r) * rsqrt(var_r + eps) * gamma[c] + beta[c], with the
// population variance. One warp per row (mean and variance by __shfl_xor_sync).
// Launch: block (32, ROWS_PER_BLOCK), grid ceil(rows / ROWS_PER_BLOCK).
__global__ void layernorm_rows(const float *__restrict__ x, const float *__restrict__ gamma,
                               const float *__restrict__ beta, float *__restrict__ out,
                               int rows, int cols, float eps) {
  const int row = blockIdx.x * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  const float *in = x + (size_t)row * cols;
  float sum = 0.0f, sq = 0.0f;
  for (int c = threadIdx.x; c < cols; c += 32) {
    float v = in[c];
    sum += v;
    sq += v * v;
  }
  for (int o = 16; o > 0; o >>= 1) {
    sum += __shfl_xor_sync(0xffffffffu, sum, o);
    sq += __shfl_xor_sync(0xffffffffu, sq, o);
  }
  const float mean = sum / cols;
  const float var = fmaxf(sq / cols - mean * mean, 0.0f);
  const float inv = rsqrtf(var + eps);
  for (int c = threadIdx.x; c < cols; c += 32)
    out[(size_t)row * cols + c] = (in[c] - mean) * inv * gamma[c] + beta[c];
}
