// In-place leaky ReLU over n elements with a grid-stride loop:
// x[i] = x[i] > 0 ? x[i] : slope * x[i]. Launch: 1-D, any grid.
__global__ void leaky_relu(float *x, float slope, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)blockDim.x * gridDim.x) {
    float v = x[i];
    x[i] = v > 0.0f ? v : slope * v;
  }
}
