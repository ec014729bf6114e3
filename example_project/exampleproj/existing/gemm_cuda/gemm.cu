/* gemm on the GPU, written the way GPU benchmark suites write it: one __global__ kernel
 * next to the host code that allocates, copies, launches, times and checks it, including
 * <cuda.h> and <cuda_runtime.h>; sizes, element type and block shape come from -D flags.
 * pytest-r3 compiles the device side only and declares gemm_kernel as it is. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include "gpu_utils.h"

#ifndef NI
# define NI 512
#endif
#ifndef NJ
# define NJ 512
#endif
#ifndef NK
# define NK 512
#endif
#ifndef DIM_THREAD_BLOCK_X
# define DIM_THREAD_BLOCK_X 32
#endif
#ifndef DIM_THREAD_BLOCK_Y
# define DIM_THREAD_BLOCK_Y 8
#endif
#ifdef DATA_TYPE_IS_DOUBLE
typedef double DATA_TYPE;
#else
typedef float DATA_TYPE;
#endif

#define ALPHA 32412.0f
#define BETA 2123.0f

__global__ void gemm_kernel(DATA_TYPE *a, DATA_TYPE *b, DATA_TYPE *c)
{
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  int i = blockIdx.y * blockDim.y + threadIdx.y;

  if ((i < NI) && (j < NJ)) {
    c[i * NJ + j] *= BETA;
    for (int k = 0; k < NK; k++)
      c[i * NJ + j] += ALPHA * a[i * NK + k] * b[k * NJ + j];
  }
}

static void gemm(DATA_TYPE *A, DATA_TYPE *B, DATA_TYPE *C)
{
  for (int i = 0; i < NI; i++)
    for (int j = 0; j < NJ; j++) {
      C[i * NJ + j] *= BETA;
      for (int k = 0; k < NK; ++k)
        C[i * NJ + j] += ALPHA * A[i * NK + k] * B[k * NJ + j];
    }
}

static void init(DATA_TYPE *A, DATA_TYPE *B, DATA_TYPE *C)
{
  for (int i = 0; i < NI; i++)
    for (int j = 0; j < NK; j++)
      A[i * NK + j] = ((DATA_TYPE) i * j) / NI;
  for (int i = 0; i < NK; i++)
    for (int j = 0; j < NJ; j++)
      B[i * NJ + j] = ((DATA_TYPE) i * j + 1) / NJ;
  for (int i = 0; i < NI; i++)
    for (int j = 0; j < NJ; j++)
      C[i * NJ + j] = ((DATA_TYPE) i * j + 2) / NJ;
}

static void compare_results(DATA_TYPE *C, DATA_TYPE *C_outputFromGpu)
{
  int fail = 0;
  for (int i = 0; i < NI; i++)
    for (int j = 0; j < NJ; j++)
      if (percent_diff(C[i * NJ + j], C_outputFromGpu[i * NJ + j]) > PERCENT_DIFF_ERROR_THRESHOLD)
        fail++;
  printf("Non-Matching CPU-GPU Outputs Beyond Error Threshold of %4.2f Percent: %d\n",
         PERCENT_DIFF_ERROR_THRESHOLD, fail);
}

static void GPU_argv_init(void)
{
  cudaDeviceProp deviceProp;
  cudaGetDeviceProperties(&deviceProp, GPU_DEVICE);
  printf("setting device %d with name %s\n", GPU_DEVICE, deviceProp.name);
  cudaSetDevice(GPU_DEVICE);
}

static void gemmCuda(DATA_TYPE *A, DATA_TYPE *B, DATA_TYPE *C, DATA_TYPE *C_outputFromGpu)
{
  DATA_TYPE *A_gpu, *B_gpu, *C_gpu;
  cudaMalloc((void **)&A_gpu, sizeof(DATA_TYPE) * NI * NK);
  cudaMalloc((void **)&B_gpu, sizeof(DATA_TYPE) * NK * NJ);
  cudaMalloc(&C_gpu, sizeof(DATA_TYPE) * NI * NJ);
  cudaMemcpy(A_gpu, A, sizeof(DATA_TYPE) * NI * NK, cudaMemcpyHostToDevice);
  cudaMemcpy(B_gpu, B, sizeof(DATA_TYPE) * NK * NJ, cudaMemcpyHostToDevice);
  cudaMemcpy(C_gpu, C, sizeof(DATA_TYPE) * NI * NJ, cudaMemcpyHostToDevice);

  dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
  dim3 grid((size_t)(ceil(((float)NI) / ((float)block.x))),
            (size_t)(ceil(((float)NJ) / ((float)block.y))));
  double t_start = rtclock();
  gemm_kernel<<<grid, block>>>(A_gpu, B_gpu, C_gpu);
  cudaDeviceSynchronize();
  double t_end = rtclock();
  fprintf(stdout, "GPU Runtime: %0.6lfs\n", t_end - t_start);
  cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess)
    fprintf(stderr, "%s\n", cudaGetErrorString(status));

  cudaMemcpy(C_outputFromGpu, C_gpu, sizeof(DATA_TYPE) * NI * NJ, cudaMemcpyDeviceToHost);
  cudaFree(A_gpu);
  cudaFree(B_gpu);
  cudaFree(C_gpu);
}

int main(int argc, char *argv[])
{
  DATA_TYPE *A = (DATA_TYPE *)malloc(NI * NK * sizeof(DATA_TYPE));
  DATA_TYPE *B = (DATA_TYPE *)malloc(NK * NJ * sizeof(DATA_TYPE));
  DATA_TYPE *C = (DATA_TYPE *)malloc(NI * NJ * sizeof(DATA_TYPE));
  DATA_TYPE *C_outputFromGpu = (DATA_TYPE *)malloc(NI * NJ * sizeof(DATA_TYPE));

  init(A, B, C);
  GPU_argv_init();
  gemmCuda(A, B, C, C_outputFromGpu);
  double t_start = rtclock();
  gemm(A, B, C);
  double t_end = rtclock();
  fprintf(stdout, "CPU Runtime: %0.6lfs\n", t_end - t_start);
  compare_results(C, C_outputFromGpu);

  free(A);
  free(B);
  free(C);
  free(C_outputFromGpu);
  return 0;
}
