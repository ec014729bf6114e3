// Row-wise softmax of a rows x cols row-major matrix: out[r][c] = exp(x[r][c] - max_r) /
// sum_c exp(x[r][c] - max_r). One block per row; row max and sum by warp shuffles plus a
// shared array of per-warp results. Launch: grid (rows), blockDim.x a multiple of 32.
#include <cfloat>

__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ float block_reduce(float v, bool is_max, float *shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = is_max ? warp_max(v) : warp_sum(v);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  v = lane < warps ? shared[lane] : (is_max ? -FLT_MAX : 0.0f);
  v = is_max ? warp_max(v) : warp_sum(v);
  __syncthreads();
  return v;
}

__global__ void softmax_rows(const float *x, float *out, int rows, int cols) {
  __shared__ float shared[32];
  const int row = blockIdx.x;
  if (row >= rows) return;
  const float *in = x + (size_t)row * cols;
  float *o = out + (size_t)row * cols;
  float m = -FLT_MAX;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, in[c]);
  m = block_reduce(m, true, shared);
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(in[c] - m);
  s = block_reduce(s, false, shared);
  const float inv = 1.0f / s;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) o[c] = __expf(in[c] - m) * inv;
}
