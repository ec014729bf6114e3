/* r3_device.h: what the CUDA and HIP device vocabularies share, written once.
 *
 * r3_cuda.h (NVPTX) and r3_hip.h (AMDGCN) each give clang, which compiles device code
 * without the vendor's headers, what nvcc or hipcc give it with no include. Much of that is
 * the same C++ on both GPUs: the qualifiers, the shape of threadIdx and friends, size_t, the
 * vector types, min/max/abs, the math that clang's builtins lower on either target, the
 * classification functions, and the helpers of r3_common.h (shared with emulation). This header holds it;
 * each side includes it first, after defining how its hardware reads the thread and block
 * coordinates (c is x, y or z):
 *
 *   __R3_THREAD_IDX(c)  __R3_BLOCK_IDX(c)  __R3_BLOCK_DIM(c)  __R3_GRID_DIM(c)
 *
 * and then adds what differs: __launch_bounds__, warpSize, synchronisation, warp or
 * wavefront functions, atomics, sqrt and the transcendental math.
 */
#ifndef R3_DEVICE_H
#define R3_DEVICE_H

#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __managed__ __attribute__((device, managed))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))

#ifdef R3_CUDA_CLANG
#include "cuda_device/vector_types.h"
#else /* HIP: the CUDA build's vector types serve as they are */
#define R3_CUDA_CLANG 1
#include "cuda_device/vector_types.h"
#undef R3_CUDA_CLANG
#endif

#define __R3_DEVICE static __device__ __forceinline__

/* threadIdx.x and friends: properties whose getters read the hardware's coordinates; each
 * converts to uint3 and dim3 (`dim3 t = threadIdx;`) */
#define __R3_DIM(type, read)                                                               \
  struct type {                                                                            \
    __declspec(property(get = __get_x)) unsigned int x;                                    \
    __declspec(property(get = __get_y)) unsigned int y;                                    \
    __declspec(property(get = __get_z)) unsigned int z;                                    \
    static __device__ __forceinline__ unsigned int __get_x() { return read(x); }           \
    static __device__ __forceinline__ unsigned int __get_y() { return read(y); }           \
    static __device__ __forceinline__ unsigned int __get_z() { return read(z); }           \
    __device__ __forceinline__ operator uint3() const {                                    \
      return uint3{__get_x(), __get_y(), __get_z()}; }                                     \
    __device__ __forceinline__ operator dim3() const {                                     \
      return dim3(__get_x(), __get_y(), __get_z()); }                                      \
  };
__R3_DIM(__r3_threadIdx_t, __R3_THREAD_IDX)
__R3_DIM(__r3_blockIdx_t, __R3_BLOCK_IDX)
__R3_DIM(__r3_blockDim_t, __R3_BLOCK_DIM)
__R3_DIM(__r3_gridDim_t, __R3_GRID_DIM)
#undef __R3_DIM
/* values, not variables: nothing external for the kernel to link against */
#define threadIdx (__r3_threadIdx_t{})
#define blockIdx (__r3_blockIdx_t{})
#define blockDim (__r3_blockDim_t{})
#define gridDim (__r3_gridDim_t{})

/* size_t and ptrdiff_t come with no include, as under nvcc and hipcc */
typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;

/* min/max, bits, halving adds, funnel shifts, reinterpretations, cache-hinted loads */
#define __R3_FN __R3_DEVICE
#include "r3_common.h"
#undef __R3_FN

/* abs of an int: the C library's is the host's */
__R3_DEVICE int abs(int x) { return x < 0 ? -x : x; }

/* math that is exact (IEEE) on both GPUs: name##f(float), and name of a float and of a
 * double (the C++ overloads nvcc's and hipcc's headers have without an include) */
#define __R3_EXACT(name)                                                                   \
  __R3_DEVICE float name##f(float x) { return __builtin_##name##f(x); }                    \
  __R3_DEVICE float name(float x) { return __builtin_##name##f(x); }                       \
  __R3_DEVICE double name(double x) { return __builtin_##name(x); }
__R3_EXACT(fabs) __R3_EXACT(floor) __R3_EXACT(ceil) __R3_EXACT(trunc) __R3_EXACT(round)
__R3_EXACT(rint) __R3_EXACT(nearbyint)
#undef __R3_EXACT
#define __R3_EXACT2(name)                                                                  \
  __R3_DEVICE float name##f(float a, float b) { return __builtin_##name##f(a, b); }        \
  __R3_DEVICE float name(float a, float b) { return __builtin_##name##f(a, b); }           \
  __R3_DEVICE double name(double a, double b) { return __builtin_##name(a, b); }
__R3_EXACT2(fmin) __R3_EXACT2(fmax) __R3_EXACT2(copysign)
#undef __R3_EXACT2
/* fma(float, float, float) is fmaf, not the double fma with its arguments promoted */
__R3_DEVICE float fmaf(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
__R3_DEVICE float fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
__R3_DEVICE double fma(double a, double b, double c) { return __builtin_fma(a, b, c); }
__R3_DEVICE float ldexpf(float x, int e) { return __builtin_ldexpf(x, e); }
__R3_DEVICE double ldexp(double x, int e) { return __builtin_ldexp(x, e); }
#define __R3_CLASSIFY(name)                                                                \
  __R3_DEVICE bool name(float x) { return __builtin_##name(x); }                           \
  __R3_DEVICE bool name(double x) { return __builtin_##name(x); }
__R3_CLASSIFY(isnan) __R3_CLASSIFY(isinf) __R3_CLASSIFY(isfinite) __R3_CLASSIFY(signbit)
#undef __R3_CLASSIFY

#endif /* R3_DEVICE_H */
