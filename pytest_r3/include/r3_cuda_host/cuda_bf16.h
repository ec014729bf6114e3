/* <cuda_bf16.h> in CUDA emulation: the device build's header (include/cuda_device/cuda_bf16.h), with
 * what it asks of the GPU done on the host (r3_half_math.h). */
#ifndef R3_HOST_CUDA_BF16_H
#define R3_HOST_CUDA_BF16_H
#include "r3_half_math.h"
#define R3_CUDA_CLANG 1
#define R3_HOST_SHUFFLES 1
#include "../cuda_device/cuda_bf16.h"
#undef R3_CUDA_CLANG
#endif
