/* r3_hip_host.h: HIP semantics on the CPU, for pytest-r3's emulation of the HIP backend.
 *
 * HIP emulation is CUDA emulation (r3_cuda_host.h and its runtime) with AMD's 64-lane
 * wavefronts: warpSize is 64, lane masks are 64-bit, and the runtime is built with
 * R3_WARP_SIZE=64, so shuffles, ballots and votes give the answers an AMD GPU gives. On
 * top come HIP's own names: hipThreadIdx_x and friends, __shfl/__shfl_down/... without
 * _sync, __ballot/__any/__all, the *_sync forms with 64-bit masks, __lane_id and
 * HIP_DYNAMIC_SHARED. pytest-r3 includes it in front of every emulated HIP kernel. */
#ifndef R3_HIP_HOST_H
#define R3_HIP_HOST_H
#define R3_HIP_EMULATION 1
#define R3_HIP_CLANG 1
#define __HIPCC__ 1
#define __HIP_DEVICE_COMPILE__ 1
#define __HIP_PLATFORM_AMD__ 1
#define __HIP_PLATFORM_HCC__ 1
#define R3_WARP_SIZE 64
#define R3_WARP_MASK unsigned long long
#include "r3_cuda_host.h"
#include "r3_hip_names.h"

#define HIP_DYNAMIC_SHARED(type, name) type *const name = (type *)__r3_cuda_dynamic_shared();
#define __R3_HIP_FN static inline __attribute__((always_inline))
#define __R3_HIP_DECL static
#define __R3_HIP_SHUFFLE(mask, v, lane, width, kind)                                       \
  __r3_shuffle((unsigned long long)(mask), v, lane, width, kind)
#define __R3_HIP_BALLOT(mask, p) __r3_cuda_vote((p) != 0, 0, (mask))
__R3_HIP_FN unsigned long long __ballot(int p) { return __r3_cuda_vote(p != 0, 0, ~0ull); }
__R3_HIP_FN int __any(int p) { return __r3_cuda_vote(p != 0, 2, ~0ull) != 0; }
__R3_HIP_FN int __all(int p) { return __r3_cuda_vote(p != 0, 1, ~0ull) != 0; }
__R3_HIP_FN unsigned int __lane_id() {
  return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % 64u; }
#include "r3_hip_shuffles.h"
#endif
