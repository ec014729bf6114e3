/* <cuda_runtime.h> for device-only compilation under pytest-r3: what kernels use is in
 * r3_cuda.h; host code next to the kernels (allocation, copies, launches, main) is parsed
 * but never built, and finds its names declared in cuda_runtime_api.h. */
#ifndef R3_CUDA_RUNTIME_H
#define R3_CUDA_RUNTIME_H
#include "cuda_runtime_api.h"
#endif
