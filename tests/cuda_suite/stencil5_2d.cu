// Five-point Laplacian on the interior of a rows x cols row-major grid:
// out[r][c] = in[r-1][c] + in[r+1][c] + in[r][c-1] + in[r][c+1] - 4 * in[r][c] for
// 0 < r < rows-1, 0 < c < cols-1; border cells of out are left untouched.
// Launch: block (BX, BY), grid (ceil(cols/BX), ceil(rows/BY)).
__global__ void laplacian5(const float *__restrict__ in, float *__restrict__ out, int rows,
                           int cols) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int r = blockIdx.y * blockDim.y + threadIdx.y;
  if (r <= 0 || c <= 0 || r >= rows - 1 || c >= cols - 1) return;
  const int i = r * cols + c;
  out[i] = in[i - cols] + in[i + cols] + in[i - 1] + in[i + 1] - 4.0f * in[i];
}
