/* pytest-r3: <cuda.h> for device-only compilation. Host code that includes it gets the
 * runtime declarations of cuda_runtime_api.h; the driver API is not declared. */
#ifndef R3_CUDA_STUB_CUDA_H
#define R3_CUDA_STUB_CUDA_H
#include "cuda_runtime_api.h"
#endif
