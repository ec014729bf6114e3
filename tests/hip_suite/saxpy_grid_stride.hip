// y = a * x + y over a grid-stride loop (gridDim), any grid size covers any n
#include <hip/hip_runtime.h>

__global__ void saxpy(int n, float a, const float *__restrict__ x, float *__restrict__ y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] = a * x[i] + y[i];
}
