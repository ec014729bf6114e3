// c = a + b, with HIP's own spellings of the thread built-ins (hipThreadIdx_x...)
#include <hip/hip_runtime.h>

extern "C" __global__ void vector_add(const float *a, const float *b, float *c, int n) {
  int i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
  if (i < n) c[i] = a[i] + b[i];
}

int main() {
  float *a, *b, *c;
  hipMalloc((void **)&a, 1024 * sizeof(float));
  hipMalloc((void **)&b, 1024 * sizeof(float));
  hipMalloc((void **)&c, 1024 * sizeof(float));
  hipLaunchKernelGGL(vector_add, dim3(4), dim3(256), 0, 0, a, b, c, 1024);
  hipDeviceSynchronize();
  return 0;
}
