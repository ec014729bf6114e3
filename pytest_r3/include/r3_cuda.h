/* r3_cuda.h: the CUDA vocabulary for kernels that pytest-r3 compiles with clang.
 *
 * pytest-r3 builds .cu files with `clang -x cuda --cuda-device-only -nocudainc -nocudalib`,
 * which needs neither a GPU nor the CUDA toolkit but also brings none of CUDA's headers.
 * This header supplies what kernels commonly use, on top of clang's NVPTX builtins:
 * the qualifiers (__global__, __device__, __shared__, __constant__), threadIdx, blockIdx,
 * blockDim, gridDim, warpSize, __syncthreads and friends, warp shuffles, atomics and the
 * usual math functions. pytest-r3 includes it in front of every CUDA kernel (-include).
 *
 * Under nvcc, or clang with CUDA's own headers, this file is empty: the same source then
 * builds against the real CUDA runtime headers (the vendor baseline does that).
 *
 * Math: with CUDA's libdevice available (R3_LIBDEVICE defined by pytest-r3), math functions
 * call libdevice's __nv_* implementations, the ones nvcc uses. Without it, sqrt, fma,
 * fabs, fmin/fmax, floor/ceil/trunc/round and division are exact (IEEE) as usual, while
 * exp, log, sin, cos, pow and tanh use the hardware approximations (as nvcc does with
 * -use_fast_math), and their double versions are unavailable.
 */
#ifndef R3_CUDA_H
#define R3_CUDA_H
#if defined(__clang__) && defined(__CUDA__) && !defined(__CUDACC__)

#define R3_CUDA_CLANG 1

#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __managed__ __attribute__((managed))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define __restrict__ __restrict

#define __R3_DEVICE static __device__ __forceinline__

/* threadIdx.x and friends: properties whose getters read the PTX special registers */
#define __R3_SREG(type, name, reg)                                                         \
  struct type {                                                                            \
    __declspec(property(get = __get_x)) unsigned int x;                                    \
    __declspec(property(get = __get_y)) unsigned int y;                                    \
    __declspec(property(get = __get_z)) unsigned int z;                                    \
    static __device__ __forceinline__ unsigned int __get_x() {                             \
      return __nvvm_read_ptx_sreg_##reg##_x(); }                                           \
    static __device__ __forceinline__ unsigned int __get_y() {                             \
      return __nvvm_read_ptx_sreg_##reg##_y(); }                                           \
    static __device__ __forceinline__ unsigned int __get_z() {                             \
      return __nvvm_read_ptx_sreg_##reg##_z(); }                                           \
  };
__R3_SREG(__r3_threadIdx_t, threadIdx, tid)
__R3_SREG(__r3_blockIdx_t, blockIdx, ctaid)
__R3_SREG(__r3_blockDim_t, blockDim, ntid)
__R3_SREG(__r3_gridDim_t, gridDim, nctaid)
#undef __R3_SREG
/* values, not variables: nothing external for the kernel to link against */
#define threadIdx (__r3_threadIdx_t{})
#define blockIdx (__r3_blockIdx_t{})
#define blockDim (__r3_blockDim_t{})
#define gridDim (__r3_gridDim_t{})
#define warpSize 32

/* vector types, enough for dim3-style code */
struct dim3 {
  unsigned int x, y, z;
  __host__ __device__ constexpr dim3(unsigned int vx = 1, unsigned int vy = 1,
                                     unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
};

/* synchronisation (__syncthreads itself is a clang builtin in CUDA mode) */
__R3_DEVICE int __syncthreads_count(int p) { return __nvvm_bar0_popc(p); }
__R3_DEVICE int __syncthreads_and(int p) { return __nvvm_bar0_and(p); }
__R3_DEVICE int __syncthreads_or(int p) { return __nvvm_bar0_or(p); }
__R3_DEVICE void __syncwarp(unsigned int mask = 0xffffffffu) { __nvvm_bar_warp_sync(mask); }
__R3_DEVICE void __threadfence_block() { __nvvm_membar_cta(); }
__R3_DEVICE void __threadfence() { __nvvm_membar_gl(); }
__R3_DEVICE void __threadfence_system() { __nvvm_membar_sys(); }

/* warp shuffles and votes */
#define __R3_SHFL(name, kind, clamp)                                                       \
  __R3_DEVICE int name(unsigned int mask, int v, int lane, int width = 32) {               \
    return __nvvm_shfl_sync_##kind##_i32(mask, v, lane, clamp); }                          \
  __R3_DEVICE unsigned int name(unsigned int mask, unsigned int v, int lane,               \
                                int width = 32) {                                          \
    return (unsigned int)__nvvm_shfl_sync_##kind##_i32(mask, (int)v, lane, clamp); }       \
  __R3_DEVICE float name(unsigned int mask, float v, int lane, int width = 32) {           \
    return __nvvm_shfl_sync_##kind##_f32(mask, v, lane, clamp); }                          \
  __R3_DEVICE double name(unsigned int mask, double v, int lane, int width = 32) {         \
    long long bits = __builtin_bit_cast(long long, v);                                     \
    int lo = __nvvm_shfl_sync_##kind##_i32(mask, (int)bits, lane, clamp);                  \
    int hi = __nvvm_shfl_sync_##kind##_i32(mask, (int)(bits >> 32), lane, clamp);          \
    return __builtin_bit_cast(double, ((long long)hi << 32) | (unsigned int)lo); }
__R3_SHFL(__shfl_sync, idx, ((32 - width) << 8) | 0x1f)
__R3_SHFL(__shfl_up_sync, up, (32 - width) << 8)
__R3_SHFL(__shfl_down_sync, down, ((32 - width) << 8) | 0x1f)
__R3_SHFL(__shfl_xor_sync, bfly, ((32 - width) << 8) | 0x1f)
#undef __R3_SHFL
__R3_DEVICE int __all_sync(unsigned int mask, int p) { return __nvvm_vote_all_sync(mask, p); }
__R3_DEVICE int __any_sync(unsigned int mask, int p) { return __nvvm_vote_any_sync(mask, p); }
__R3_DEVICE unsigned int __ballot_sync(unsigned int mask, int p) {
  return __nvvm_vote_ballot_sync(mask, p); }

/* atomics: relaxed, device scope, as CUDA's atomicXxx */
#define __R3_ATOMIC(name, op, type)                                                        \
  __R3_DEVICE type name(type *address, type value) {                                       \
    return op(address, value, __ATOMIC_RELAXED); }
#define __R3_ATOMICS(type)                                                                 \
  __R3_ATOMIC(atomicAdd, __atomic_fetch_add, type)                                         \
  __R3_ATOMIC(atomicSub, __atomic_fetch_sub, type)                                         \
  __R3_ATOMIC(atomicExch, __atomic_exchange_n, type)                                       \
  __R3_ATOMIC(atomicMin, __atomic_fetch_min, type)                                         \
  __R3_ATOMIC(atomicMax, __atomic_fetch_max, type)                                         \
  __R3_DEVICE type atomicCAS(type *address, type compare, type value) {                    \
    __atomic_compare_exchange_n(address, &compare, value, false, __ATOMIC_RELAXED,         \
                                __ATOMIC_RELAXED);                                         \
    return compare; }
#define __R3_BIT_ATOMICS(type)                                                             \
  __R3_ATOMIC(atomicAnd, __atomic_fetch_and, type)                                         \
  __R3_ATOMIC(atomicOr, __atomic_fetch_or, type)                                           \
  __R3_ATOMIC(atomicXor, __atomic_fetch_xor, type)
__R3_ATOMICS(int)
__R3_ATOMICS(unsigned int)
__R3_ATOMICS(long long)
__R3_ATOMICS(unsigned long long)
__R3_BIT_ATOMICS(int)
__R3_BIT_ATOMICS(unsigned int)
__R3_BIT_ATOMICS(long long)
__R3_BIT_ATOMICS(unsigned long long)
__R3_ATOMIC(atomicAdd, __atomic_fetch_add, float)
__R3_ATOMIC(atomicAdd, __atomic_fetch_add, double)
__R3_DEVICE float atomicExch(float *address, float value) {
  return __builtin_bit_cast(float, __atomic_exchange_n((int *)address,
                            __builtin_bit_cast(int, value), __ATOMIC_RELAXED)); }
#undef __R3_ATOMIC
#undef __R3_ATOMICS
#undef __R3_BIT_ATOMICS

/* read-only cache load */
template <typename T> __R3_DEVICE T __ldg(const T *p) { return *p; }

/* math */
#define __R3_EXACT(name, builtin)                                                          \
  __R3_DEVICE float name##f(float x) { return builtin##f(x); }                             \
  __R3_DEVICE double name(double x) { return builtin(x); }
__R3_EXACT(fabs, __builtin_fabs)
__R3_EXACT(floor, __builtin_floor)
__R3_EXACT(ceil, __builtin_ceil)
__R3_EXACT(trunc, __builtin_trunc)
__R3_EXACT(round, __builtin_round)
__R3_EXACT(rint, __builtin_rint)
#undef __R3_EXACT
__R3_DEVICE float sqrtf(float x) { return __nvvm_sqrt_rn_f(x); }
__R3_DEVICE double sqrt(double x) { return __nvvm_sqrt_rn_d(x); }
__R3_DEVICE float rsqrtf(float x) { return 1.0f / __nvvm_sqrt_rn_f(x); }
__R3_DEVICE double rsqrt(double x) { return 1.0 / __nvvm_sqrt_rn_d(x); }
__R3_DEVICE float fmaf(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
__R3_DEVICE double fma(double a, double b, double c) { return __builtin_fma(a, b, c); }
__R3_DEVICE float fminf(float a, float b) { return __builtin_fminf(a, b); }
__R3_DEVICE float fmaxf(float a, float b) { return __builtin_fmaxf(a, b); }
__R3_DEVICE double fmin(double a, double b) { return __builtin_fmin(a, b); }
__R3_DEVICE double fmax(double a, double b) { return __builtin_fmax(a, b); }
__R3_DEVICE float copysignf(float a, float b) { return __builtin_copysignf(a, b); }
__R3_DEVICE double copysign(double a, double b) { return __builtin_copysign(a, b); }
__R3_DEVICE float __fdividef(float a, float b) { return __nvvm_div_approx_f(a, b); }
__R3_DEVICE float __saturatef(float x) { return __nvvm_saturate_f(x); }
__R3_DEVICE int min(int a, int b) { return a < b ? a : b; }
__R3_DEVICE int max(int a, int b) { return a > b ? a : b; }
__R3_DEVICE unsigned int min(unsigned int a, unsigned int b) { return a < b ? a : b; }
__R3_DEVICE unsigned int max(unsigned int a, unsigned int b) { return a > b ? a : b; }
__R3_DEVICE long long min(long long a, long long b) { return a < b ? a : b; }
__R3_DEVICE long long max(long long a, long long b) { return a > b ? a : b; }
__R3_DEVICE unsigned long long min(unsigned long long a, unsigned long long b) {
  return a < b ? a : b; }
__R3_DEVICE unsigned long long max(unsigned long long a, unsigned long long b) {
  return a > b ? a : b; }
__R3_DEVICE float min(float a, float b) { return __builtin_fminf(a, b); }
__R3_DEVICE float max(float a, float b) { return __builtin_fmaxf(a, b); }
__R3_DEVICE double min(double a, double b) { return __builtin_fmin(a, b); }
__R3_DEVICE double max(double a, double b) { return __builtin_fmax(a, b); }
__R3_DEVICE int abs(int x) { return x < 0 ? -x : x; }
__R3_DEVICE int __popc(unsigned int x) { return __builtin_popcount(x); }
__R3_DEVICE int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned int)x); }
__R3_DEVICE int __mul24(int a, int b) { return __nvvm_mul24_i(a, b); }
__R3_DEVICE int __mulhi(int a, int b) { return __nvvm_mulhi_i(a, b); }

#define __R3_LOG2E 1.4426950408889634f
#define __R3_LN2 0.6931471805599453f
#ifdef R3_LIBDEVICE
#define __R3_LIBDEVICE_1(name)                                                             \
  extern "C" __device__ float __nv_##name##f(float);                                       \
  extern "C" __device__ double __nv_##name(double);                                        \
  __R3_DEVICE float name##f(float x) { return __nv_##name##f(x); }                         \
  __R3_DEVICE double name(double x) { return __nv_##name(x); }
#define __R3_LIBDEVICE_2(name)                                                             \
  extern "C" __device__ float __nv_##name##f(float, float);                                \
  extern "C" __device__ double __nv_##name(double, double);                                \
  __R3_DEVICE float name##f(float x, float y) { return __nv_##name##f(x, y); }             \
  __R3_DEVICE double name(double x, double y) { return __nv_##name(x, y); }
__R3_LIBDEVICE_1(exp) __R3_LIBDEVICE_1(exp2) __R3_LIBDEVICE_1(exp10)
__R3_LIBDEVICE_1(expm1) __R3_LIBDEVICE_1(log) __R3_LIBDEVICE_1(log2)
__R3_LIBDEVICE_1(log10) __R3_LIBDEVICE_1(log1p) __R3_LIBDEVICE_1(sin)
__R3_LIBDEVICE_1(cos) __R3_LIBDEVICE_1(tan) __R3_LIBDEVICE_1(asin)
__R3_LIBDEVICE_1(acos) __R3_LIBDEVICE_1(atan) __R3_LIBDEVICE_1(sinh)
__R3_LIBDEVICE_1(cosh) __R3_LIBDEVICE_1(tanh) __R3_LIBDEVICE_1(erf)
__R3_LIBDEVICE_1(erfc) __R3_LIBDEVICE_1(cbrt)
__R3_LIBDEVICE_2(pow) __R3_LIBDEVICE_2(atan2) __R3_LIBDEVICE_2(fmod)
__R3_LIBDEVICE_2(hypot)
#undef __R3_LIBDEVICE_1
#undef __R3_LIBDEVICE_2
#else
/* the hardware approximations, as nvcc's -use_fast_math gives */
__R3_DEVICE float exp2f(float x) { return __nvvm_ex2_approx_f(x); }
__R3_DEVICE float expf(float x) { return __nvvm_ex2_approx_f(x * __R3_LOG2E); }
__R3_DEVICE float log2f(float x) { return __nvvm_lg2_approx_f(x); }
__R3_DEVICE float logf(float x) { return __nvvm_lg2_approx_f(x) * __R3_LN2; }
__R3_DEVICE float sinf(float x) { return __nvvm_sin_approx_f(x); }
__R3_DEVICE float cosf(float x) { return __nvvm_cos_approx_f(x); }
__R3_DEVICE float powf(float x, float y) {
  return __nvvm_ex2_approx_f(y * __nvvm_lg2_approx_f(x)); }
__R3_DEVICE float tanhf(float x) {
  float e = __nvvm_ex2_approx_f(-2.0f * __builtin_fabsf(x) * __R3_LOG2E);
  return __builtin_copysignf((1.0f - e) / (1.0f + e), x); }
#define __R3_NEEDS_LIBDEVICE(name, ...)                                                    \
  __attribute__((unavailable(#name " needs CUDA's libdevice (libdevice.10.bc); "          \
                 "install the CUDA toolkit or set PYTEST_R3_LIBDEVICE to the file")))      \
  __device__ double name(__VA_ARGS__);
__R3_NEEDS_LIBDEVICE(exp, double) __R3_NEEDS_LIBDEVICE(exp2, double)
__R3_NEEDS_LIBDEVICE(log, double) __R3_NEEDS_LIBDEVICE(log2, double)
__R3_NEEDS_LIBDEVICE(sin, double) __R3_NEEDS_LIBDEVICE(cos, double)
__R3_NEEDS_LIBDEVICE(tanh, double) __R3_NEEDS_LIBDEVICE(pow, double, double)
#undef __R3_NEEDS_LIBDEVICE
#endif
__R3_DEVICE float __expf(float x) { return __nvvm_ex2_approx_f(x * __R3_LOG2E); }
__R3_DEVICE float __logf(float x) { return __nvvm_lg2_approx_f(x) * __R3_LN2; }
__R3_DEVICE float __sinf(float x) { return __nvvm_sin_approx_f(x); }
__R3_DEVICE float __cosf(float x) { return __nvvm_cos_approx_f(x); }
__R3_DEVICE float __powf(float x, float y) {
  return __nvvm_ex2_approx_f(y * __nvvm_lg2_approx_f(x)); }

#undef __R3_DEVICE
#endif /* clang CUDA without CUDA's headers */
#endif /* R3_CUDA_H */
