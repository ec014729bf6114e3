// RGBA8 to grayscale: for each pixel p = rgba[i] (i < n, uchar4), gray[i] = the luma
// 0.299 r + 0.587 g + 0.114 b rounded to nearest and clamped to [0, 255], and
// out_rgba[i] = (gray, gray, gray, p.w). Launch: 1-D, grid ceil(n / blockDim.x).
__global__ void rgba_to_gray(const uchar4 *rgba, unsigned char *gray, uchar4 *out_rgba, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  uchar4 p = rgba[i];
  float luma = 0.299f * p.x + 0.587f * p.y + 0.114f * p.z;
  int g = __float2int_rn(__saturatef(luma / 255.0f) * 255.0f);
  unsigned char v = (unsigned char)g;
  gray[i] = v;
  out_rgba[i] = make_uchar4(v, v, v, p.w);
}
