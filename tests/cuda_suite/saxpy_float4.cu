// y[i] = a * x[i] + y[i] for i < n, four elements at a time through float4 loads and
// stores (x and y 16-byte aligned), the last n % 4 elements one by one.
// Launch: 1-D, any grid (grid-stride loop).
__global__ void saxpy_float4(int n, float a, const float *x, float *y) {
  const int n4 = n / 4;
  const float4 *x4 = reinterpret_cast<const float4 *>(x);
  float4 *y4 = reinterpret_cast<float4 *>(y);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += blockDim.x * gridDim.x) {
    float4 xv = x4[i];
    float4 yv = y4[i];
    yv.x = fmaf(a, xv.x, yv.x);
    yv.y = fmaf(a, xv.y, yv.y);
    yv.z = fmaf(a, xv.z, yv.z);
    yv.w = fmaf(a, xv.w, yv.w);
    y4[i] = yv;
  }
  const int tail = n4 * 4 + blockIdx.x * blockDim.x + threadIdx.x;
  if (tail < n) y[tail] = fmaf(a, x[tail], y[tail]);
}
