// 1-D convolution with a 9-tap Gaussian held in constant memory, zero padding:
// out[i] = sum_{k=-4..4} weights[k + 4] * in[i + k] (in[j] = 0 outside [0, n)).
// Launch: 1-D, grid ceil(n / blockDim.x).
#define RADIUS 4

__constant__ float c_weights[2 * RADIUS + 1] = {
    0.0162162162f, 0.0540540541f, 0.1216216216f, 0.1945945946f, 0.2270270270f,
    0.1945945946f, 0.1216216216f, 0.0540540541f, 0.0162162162f};

__global__ void conv1d_gauss(const float *__restrict__ in, float *__restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc = 0.0f;
#pragma unroll
  for (int k = -RADIUS; k <= RADIUS; ++k) {
    int j = i + k;
    if (j >= 0 && j < n) acc += c_weights[k + RADIUS] * in[j];
  }
  out[i] = acc;
}
