/* pytest-r3: <cuda_runtime.h> for device-only compilation (see cuda_runtime_api.h). */
#ifndef R3_CUDA_STUB_RUNTIME_H
#define R3_CUDA_STUB_RUNTIME_H
#include "cuda_runtime_api.h"
#endif
