/* r3_cuda_host.h: CUDA semantics on the CPU, for pytest-r3's emulation of the CUDA backend.
 *
 * When no GPU is usable, pytest-r3 compiles a .cu file for the host with clang in C++ mode
 * (`-x c++ -nostdinc++`) and includes this header in front of it (-include). It maps the
 * CUDA vocabulary onto calls into a small runtime (r3_cuda_host_runtime.c, linked into
 * every emulated kernel) that runs each CUDA thread as a loop iteration, or as a fiber when
 * the kernel has barriers, shuffles or votes:
 *
 *   threadIdx/blockIdx/blockDim/gridDim   the runtime's per-thread state
 *   __syncthreads (and _count/_and/_or)   a barrier across the block's fibers
 *   __shfl*_sync, __ballot/__all/__any    an exchange across the warp's 32 fibers
 *   __shared__                            one static copy (blocks run one at a time)
 *   extern __shared__ T name[]            rewritten by pytest-r3 to a pointer to the
 *                                         launch's dynamic shared memory
 *   atomics                               __atomic builtins; printf: the host's stdout
 *
 * Only C headers (zig's libc) are used: no C++ standard library is needed.
 */
#ifndef R3_CUDA_HOST_H
#define R3_CUDA_HOST_H

#define R3_CUDA_CLANG 1
#define R3_CUDA_EMULATION 1
/* lanes per warp and the type of a lane mask: CUDA's 32 here; HIP emulation (r3_hip_host.h)
 * sets 64 and a 64-bit mask before including this header */
#ifndef R3_WARP_SIZE
#define R3_WARP_SIZE 32
#endif
#ifndef R3_WARP_MASK
#define R3_WARP_MASK unsigned int
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h> /* abs, labs, llabs: the C library's, as kernels and host code expect */
#include <string.h> /* memcpy, memset: device code has them without an include, as under nvcc */

#define __global__
#define __device__
#define __host__
#define __shared__ static __attribute__((section(".r3.shared")))
#define __constant__
#define __managed__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))

#define __R3_HOST static inline __attribute__((always_inline))

/* vector types */
#define __R3_VECTOR(name, type)                                                            \
  struct name##1 { type x; };                                                              \
  struct name##2 { type x, y; };                                                           \
  struct name##3 { type x, y, z; };                                                        \
  struct __attribute__((aligned(4 * sizeof(type) > 16 ? 16 : 4 * sizeof(type)))) name##4 { \
    type x, y, z, w; };                                                                    \
  __R3_HOST name##1 make_##name##1(type x) { return {x}; }                                 \
  __R3_HOST name##2 make_##name##2(type x, type y) { return {x, y}; }                      \
  __R3_HOST name##3 make_##name##3(type x, type y, type z) { return {x, y, z}; }           \
  __R3_HOST name##4 make_##name##4(type x, type y, type z, type w) { return {x, y, z, w}; }
__R3_VECTOR(char, signed char)
__R3_VECTOR(uchar, unsigned char)
__R3_VECTOR(short, short)
__R3_VECTOR(ushort, unsigned short)
__R3_VECTOR(int, int)
__R3_VECTOR(uint, unsigned int)
__R3_VECTOR(long, long)
__R3_VECTOR(ulong, unsigned long)
__R3_VECTOR(longlong, long long)
__R3_VECTOR(ulonglong, unsigned long long)
__R3_VECTOR(float, float)
__R3_VECTOR(double, double)
#undef __R3_VECTOR

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
      : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return {x, y, z}; }
};

/* the runtime's services (r3_cuda_host_runtime.c) */
struct __r3_cuda_state_t { uint3 thread_idx, block_idx; dim3 block_dim, grid_dim; };
extern "C" {
const __r3_cuda_state_t *__r3_cuda_state(void) __attribute__((const, nothrow));
void *__r3_cuda_dynamic_shared(void) __attribute__((const, nothrow));
int __r3_cuda_barrier(int predicate, int op, int line) __attribute__((nothrow));
unsigned long long __r3_cuda_shuffle(unsigned long long value, int kind, int lane, int width,
                                     unsigned long long mask) __attribute__((nothrow));
unsigned long long __r3_cuda_vote(int predicate, int kind, unsigned long long mask)
    __attribute__((nothrow));
unsigned long long __r3_cuda_activemask(void) __attribute__((nothrow));
int __r3_cuda_printf(const char *format, ...) __attribute__((nothrow, format(printf, 1, 2)));
unsigned long long __r3_cuda_match(unsigned long long value, int kind,
                                   unsigned long long mask, int *predicate)
    __attribute__((nothrow));
void __r3_cuda_trap(int line) __attribute__((nothrow, noreturn));
void __r3_cuda_assert_fail(const char *condition, const char *file, int line)
    __attribute__((nothrow, noreturn));
}

#define threadIdx (__r3_cuda_state()->thread_idx)
#define blockIdx (__r3_cuda_state()->block_idx)
#define blockDim (__r3_cuda_state()->block_dim)
#define gridDim (__r3_cuda_state()->grid_dim)
#define warpSize R3_WARP_SIZE

/* barriers: the line lets the runtime tell two different __syncthreads apart */
#define __syncthreads() ((void)__r3_cuda_barrier(1, 0, __LINE__))
#define __syncthreads_count(p) __r3_cuda_barrier((p) != 0, 1, __LINE__)
#define __syncthreads_and(p) __r3_cuda_barrier((p) != 0, 2, __LINE__)
#define __syncthreads_or(p) __r3_cuda_barrier((p) != 0, 3, __LINE__)
__R3_HOST void __syncwarp(R3_WARP_MASK mask = (R3_WARP_MASK)~0ull) {
  __r3_cuda_vote(1, 3, mask); }
__R3_HOST void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
__R3_HOST void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
__R3_HOST void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
#define __trap() __r3_cuda_trap(__LINE__)

/* warp shuffles (kind: 0 index, 1 up, 2 down, 3 xor) and votes (0 ballot, 1 all, 2 any) */
template <typename T> __R3_HOST T __r3_shuffle(R3_WARP_MASK mask, T v, int lane, int width,
                                               int kind) {
  static_assert(sizeof(T) <= 8, "shuffles move values of at most 8 bytes");
  unsigned long long bits = 0;
  __builtin_memcpy(&bits, &v, sizeof(T));
  bits = __r3_cuda_shuffle(bits, kind, lane, width, mask);
  T out;
  __builtin_memcpy(&out, &bits, sizeof(T));
  return out;
}
#ifndef R3_HIP_EMULATION /* HIP's *_sync forms take 64-bit masks: r3_hip_shuffles.h */
template <typename T> __R3_HOST T __shfl_sync(unsigned int mask, T v, int lane,
                                              int width = 32) {
  return __r3_shuffle(mask, v, lane, width, 0); }
template <typename T> __R3_HOST T __shfl_up_sync(unsigned int mask, T v, unsigned int d,
                                                 int width = 32) {
  return __r3_shuffle(mask, v, (int)d, width, 1); }
template <typename T> __R3_HOST T __shfl_down_sync(unsigned int mask, T v, unsigned int d,
                                                   int width = 32) {
  return __r3_shuffle(mask, v, (int)d, width, 2); }
template <typename T> __R3_HOST T __shfl_xor_sync(unsigned int mask, T v, int lane_mask,
                                                  int width = 32) {
  return __r3_shuffle(mask, v, lane_mask, width, 3); }
__R3_HOST unsigned int __ballot_sync(unsigned int mask, int p) {
  return __r3_cuda_vote(p != 0, 0, mask); }
__R3_HOST int __all_sync(unsigned int mask, int p) { return (int)__r3_cuda_vote(p != 0, 1, mask); }
__R3_HOST int __any_sync(unsigned int mask, int p) { return (int)__r3_cuda_vote(p != 0, 2, mask); }
#endif
__R3_HOST R3_WARP_MASK __activemask() { return (R3_WARP_MASK)__r3_cuda_activemask(); }
template <typename T> __R3_HOST R3_WARP_MASK __match_any_sync(R3_WARP_MASK mask, T v) {
  static_assert(sizeof(T) <= 8, "__match_any_sync compares values of at most 8 bytes");
  unsigned long long bits = 0;
  __builtin_memcpy(&bits, &v, sizeof(T));
  return __r3_cuda_match(bits, 0, mask, nullptr); }
template <typename T> __R3_HOST R3_WARP_MASK __match_all_sync(R3_WARP_MASK mask, T v,
                                                              int *pred) {
  static_assert(sizeof(T) <= 8, "__match_all_sync compares values of at most 8 bytes");
  unsigned long long bits = 0;
  __builtin_memcpy(&bits, &v, sizeof(T));
  return __r3_cuda_match(bits, 1, mask, pred); }

/* atomics: relaxed, as CUDA's atomicXxx (blocks and their threads never run at once here) */
template <typename T> struct __r3_same { typedef T type; };
#define __R3_V(T) typename __r3_same<T>::type
template <typename T> __R3_HOST T atomicAdd(T *a, __R3_V(T) v) {
  return __atomic_fetch_add(a, v, __ATOMIC_RELAXED); }
template <typename T> __R3_HOST T atomicSub(T *a, __R3_V(T) v) {
  return __atomic_fetch_sub(a, v, __ATOMIC_RELAXED); }
template <typename T> __R3_HOST T atomicExch(T *a, __R3_V(T) v) {
  T old;
  __atomic_exchange(a, &v, &old, __ATOMIC_RELAXED);
  return old; }
template <typename T> __R3_HOST T atomicMin(T *a, __R3_V(T) v) {
  return __atomic_fetch_min(a, v, __ATOMIC_RELAXED); }
template <typename T> __R3_HOST T atomicMax(T *a, __R3_V(T) v) {
  return __atomic_fetch_max(a, v, __ATOMIC_RELAXED); }
template <typename T> __R3_HOST T atomicAnd(T *a, __R3_V(T) v) {
  return __atomic_fetch_and(a, v, __ATOMIC_RELAXED); }
template <typename T> __R3_HOST T atomicOr(T *a, __R3_V(T) v) {
  return __atomic_fetch_or(a, v, __ATOMIC_RELAXED); }
template <typename T> __R3_HOST T atomicXor(T *a, __R3_V(T) v) {
  return __atomic_fetch_xor(a, v, __ATOMIC_RELAXED); }
template <typename T> __R3_HOST T atomicCAS(T *a, __R3_V(T) compare, __R3_V(T) v) {
  __atomic_compare_exchange(a, &compare, &v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return compare; }
#define __R3_SCOPED(name)                                                                  \
  template <typename T> __R3_HOST T name##_block(T *a, typename __r3_same<T>::type v) {    \
    return name(a, v); }                                                                   \
  template <typename T> __R3_HOST T name##_system(T *a, typename __r3_same<T>::type v) {   \
    return name(a, v); }
__R3_SCOPED(atomicAdd) __R3_SCOPED(atomicSub) __R3_SCOPED(atomicExch)
__R3_SCOPED(atomicMin) __R3_SCOPED(atomicMax) __R3_SCOPED(atomicAnd)
__R3_SCOPED(atomicOr) __R3_SCOPED(atomicXor)
#undef __R3_SCOPED
#undef __R3_V
__R3_HOST unsigned int atomicInc(unsigned int *a, unsigned int limit) {
  unsigned int old = *a;
  *a = old >= limit ? 0 : old + 1;
  return old; }
__R3_HOST unsigned int atomicDec(unsigned int *a, unsigned int limit) {
  unsigned int old = *a;
  *a = (old == 0 || old > limit) ? limit : old - 1;
  return old; }

/* math: the host's libm, plus the float overloads and intrinsics CUDA provides */
#define __R3_FLOAT_1(name)                                                                 \
  __R3_HOST float name(float x) { return name##f(x); }
#define __R3_FLOAT_2(name)                                                                 \
  __R3_HOST float name(float x, float y) { return name##f(x, y); }
__R3_FLOAT_1(sqrt) __R3_FLOAT_1(cbrt) __R3_FLOAT_1(exp) __R3_FLOAT_1(exp2)
__R3_FLOAT_1(expm1) __R3_FLOAT_1(log) __R3_FLOAT_1(log2) __R3_FLOAT_1(log10)
__R3_FLOAT_1(log1p) __R3_FLOAT_1(sin) __R3_FLOAT_1(cos) __R3_FLOAT_1(tan)
__R3_FLOAT_1(asin) __R3_FLOAT_1(acos) __R3_FLOAT_1(atan) __R3_FLOAT_1(sinh)
__R3_FLOAT_1(cosh) __R3_FLOAT_1(tanh) __R3_FLOAT_1(erf) __R3_FLOAT_1(erfc)
__R3_FLOAT_1(fabs) __R3_FLOAT_1(floor) __R3_FLOAT_1(ceil) __R3_FLOAT_1(trunc)
__R3_FLOAT_1(round) __R3_FLOAT_1(rint)
__R3_FLOAT_2(pow) __R3_FLOAT_2(atan2) __R3_FLOAT_2(fmod) __R3_FLOAT_2(hypot)
__R3_FLOAT_2(fmin) __R3_FLOAT_2(fmax) __R3_FLOAT_2(copysign)
#undef __R3_FLOAT_1
#undef __R3_FLOAT_2
__R3_HOST float fma(float a, float b, float c) { return fmaf(a, b, c); }
/* names glibc's math.h declares already (some only in newer glibc): macros over our own */
__R3_HOST float __r3_rsqrtf(float x) { return 1.0f / sqrtf(x); }
__R3_HOST double __r3_rsqrt(double x) { return 1.0 / sqrt(x); }
__R3_HOST float __r3_exp10f(float x) { return powf(10.0f, x); }
#define rsqrtf(x) __r3_rsqrtf(x)
#define rsqrt(x) __r3_rsqrt(x)
#define exp10f(x) __r3_exp10f(x)
#define __exp10f(x) __r3_exp10f(x)
#define __expf(x) expf(x)
#define __logf(x) logf(x)
#define __log2f(x) log2f(x)
#define __log10f(x) log10f(x)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanf(x) tanf(x)
#define __powf(x, y) powf(x, y)
__R3_HOST float __fdividef(float a, float b) { return a / b; }
__R3_HOST float __frcp_rn(float x) { return 1.0f / x; }
__R3_HOST float __fsqrt_rn(float x) { return sqrtf(x); }
__R3_HOST float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
__R3_HOST float __fadd_rn(float a, float b) { return a + b; }
__R3_HOST float __fmul_rn(float a, float b) { return a * b; }
__R3_HOST float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
__R3_HOST int __float2int_rn(float x) { return (int)rintf(x); }
__R3_HOST int __float2int_rz(float x) { return (int)x; }
__R3_HOST float __int2float_rn(int x) { return (float)x; }
/* min, max (CUDA's overloads), bits, halving adds, funnel shifts, 24-bit products,
 * reinterpretations, __ldg and the cache-hinted loads and stores: as on the GPU */
#define __R3_FN __R3_HOST
#include "r3_common.h"
#undef __R3_FN
__R3_HOST unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
  unsigned long long bytes = ((unsigned long long)y << 32) | x;
  unsigned int out = 0;
  for (int i = 0; i < 4; ++i)
    out |= (unsigned int)((bytes >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return out; }

/* device printf writes to the host's stdout, at most 1 MiB per launch (as a GPU's buffer) */
#define printf(...) __r3_cuda_printf(__VA_ARGS__)

#undef __R3_HOST
#endif /* R3_CUDA_HOST_H */
