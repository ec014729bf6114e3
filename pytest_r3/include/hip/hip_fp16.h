/* <hip/hip_fp16.h> for pytest-r3: __half and __half2 on clang's _Float16, the same header
 * as the CUDA build's cuda_fp16.h (which the AMDGCN back end turns into native f16
 * instructions); in HIP emulation, that header's host form. */
#ifndef R3_HIP_FP16_H
#define R3_HIP_FP16_H
#ifdef R3_HIP_EMULATION
#include "../r3_cuda_host/cuda_fp16.h"
#else
#define R3_CUDA_CLANG 1
#define R3_HOST_SHUFFLES 1 /* r3_hip.h's shuffles take any type already */
#include "../cuda_device/cuda_fp16.h"
#undef R3_HOST_SHUFFLES
#undef R3_CUDA_CLANG
#endif
#endif
