/* r3_hip.h: the HIP vocabulary for kernels that pytest-r3 compiles with clang for AMD GPUs.
 *
 * pytest-r3 builds .hip files with `clang -x hip --cuda-device-only --offload-arch=gfx942
 * -nogpuinc -nogpulib`, which needs neither a GPU nor ROCm but also brings none of HIP's
 * headers or device libraries. This header supplies, on top of clang's AMDGCN builtins,
 * what hipcc gives device code: the qualifiers, threadIdx and friends (also the
 * hipThreadIdx_x spellings), __syncthreads, wavefront functions over 64 lanes, atomics, the
 * bit and conversion intrinsics and the float math that the AMDGPU back end lowers itself.
 * pytest-r3 includes it in front of every HIP kernel (-include); <hip/hip_runtime.h> and
 * the other headers kernels include are in hip_device/.
 *
 * Math: without ROCm's device libraries (ocml), what the AMDGPU back end lowers itself is
 * available: sqrt, fma, fabs, fmin/fmax, floor/ceil/trunc/round/rint, copysign, ldexp in
 * float and double; exp, exp2, exp10, log, log2, log10, sin, cos, tan, pow, tanh in float
 * (the hardware's approximations, as hipcc's fast-math versions). Double transcendental
 * functions are not provided: the build says which one in one line.
 */
#ifndef R3_HIP_H
#define R3_HIP_H
#if defined(__clang__) && defined(__HIP__) && defined(__AMDGCN__)

#define R3_HIP_CLANG 1
#define __HIP_PLATFORM_AMD__ 1
#define __HIP_PLATFORM_HCC__ 1

#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __managed__ __attribute__((device, managed))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...) __attribute__((amdgpu_flat_work_group_size(1, __R3_FIRST(__VA_ARGS__))))
#define __R3_FIRST(first, ...) first
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
#define HIP_DYNAMIC_SHARED(type, name) extern __shared__ type name[];

#define R3_CUDA_CLANG 1 /* the CUDA build's vector types serve as they are */
#include "cuda_device/vector_types.h"
#undef R3_CUDA_CLANG

#define __R3_DEVICE static __device__ __forceinline__

/* threadIdx.x and friends: properties whose getters call the AMDGCN builtins */
#define __R3_DIM(type, x_expr, y_expr, z_expr)                                             \
  struct type {                                                                            \
    __declspec(property(get = __get_x)) unsigned int x;                                    \
    __declspec(property(get = __get_y)) unsigned int y;                                    \
    __declspec(property(get = __get_z)) unsigned int z;                                    \
    static __device__ __forceinline__ unsigned int __get_x() { return x_expr; }            \
    static __device__ __forceinline__ unsigned int __get_y() { return y_expr; }            \
    static __device__ __forceinline__ unsigned int __get_z() { return z_expr; }            \
    __device__ __forceinline__ operator uint3() const {                                    \
      return uint3{__get_x(), __get_y(), __get_z()}; }                                     \
    __device__ __forceinline__ operator dim3() const {                                     \
      return dim3(__get_x(), __get_y(), __get_z()); }                                      \
  };
__R3_DIM(__r3_threadIdx_t, __builtin_amdgcn_workitem_id_x(), __builtin_amdgcn_workitem_id_y(),
         __builtin_amdgcn_workitem_id_z())
__R3_DIM(__r3_blockIdx_t, __builtin_amdgcn_workgroup_id_x(), __builtin_amdgcn_workgroup_id_y(),
         __builtin_amdgcn_workgroup_id_z())
__R3_DIM(__r3_blockDim_t, __builtin_amdgcn_workgroup_size_x(),
         __builtin_amdgcn_workgroup_size_y(), __builtin_amdgcn_workgroup_size_z())
__R3_DIM(__r3_gridDim_t,
         __builtin_amdgcn_grid_size_x() / __builtin_amdgcn_workgroup_size_x(),
         __builtin_amdgcn_grid_size_y() / __builtin_amdgcn_workgroup_size_y(),
         __builtin_amdgcn_grid_size_z() / __builtin_amdgcn_workgroup_size_z())
#undef __R3_DIM
#define threadIdx (__r3_threadIdx_t{})
#define blockIdx (__r3_blockIdx_t{})
#define blockDim (__r3_blockDim_t{})
#define gridDim (__r3_gridDim_t{})
#define warpSize 64
#include "r3_hip_names.h"

typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;

/* synchronisation, as HIP's: fences around the hardware barrier */
__R3_DEVICE void __syncthreads() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup"); }
__R3_DEVICE void __threadfence_block() { __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "workgroup"); }
__R3_DEVICE void __threadfence() { __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "agent"); }
__R3_DEVICE void __threadfence_system() { __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, ""); }
__R3_DEVICE void __syncwarp() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
  __builtin_amdgcn_wave_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront"); }
__R3_DEVICE int __syncthreads_count(int p);
__R3_DEVICE int __syncthreads_or(int p);
__R3_DEVICE int __syncthreads_and(int p);

/* wavefront functions: 64 lanes, through ds_bpermute (kind: 0 index, 1 up, 2 down, 3 xor) */
__R3_DEVICE unsigned int __lane_id() {
  return __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u)); }
__R3_DEVICE int __r3_source_lane(int kind, int lane, int width) {
  int self = (int)__lane_id(), base = self & ~(width - 1);
  switch (kind) {
  case 0: return base + (lane & (width - 1));
  case 1: return self - lane < base ? self : self - lane;
  case 2: return (self & (width - 1)) + lane >= width ? self : self + lane;
  default: { int src = self ^ lane; return src >= base + width ? self : src; }
  }
}
template <typename T> __R3_DEVICE T __r3_shuffle(T v, int lane, int width, int kind) {
  static_assert(sizeof(T) <= 8, "shuffles move values of at most 8 bytes");
  int address = __r3_source_lane(kind, lane, width) << 2;
  unsigned long long bits = 0;
  __builtin_memcpy(&bits, &v, sizeof(T));
  unsigned int lo = (unsigned int)__builtin_amdgcn_ds_bpermute(address, (int)bits);
  unsigned int hi = sizeof(T) > 4
      ? (unsigned int)__builtin_amdgcn_ds_bpermute(address, (int)(bits >> 32)) : 0u;
  bits = ((unsigned long long)hi << 32) | lo;
  T out;
  __builtin_memcpy(&out, &bits, sizeof(T));
  return out;
}
__R3_DEVICE unsigned long long __ballot(int p) { return __builtin_amdgcn_ballot_w64(p != 0); }
__R3_DEVICE unsigned long long __activemask() { return __builtin_amdgcn_ballot_w64(1); }
__R3_DEVICE int __any(int p) { return __ballot(p) != 0; }
__R3_DEVICE int __all(int p) { return __ballot(p) == __activemask(); }

/* the reductions of a block across its wavefronts, through shared memory */
__R3_DEVICE int __r3_block_reduce(int p, int op) {
  __shared__ int counts[3];
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0)
    counts[0] = counts[1] = counts[2] = 0;
  __syncthreads();
  if (p) __hip_atomic_fetch_add(&counts[0], 1, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP);
  else __hip_atomic_fetch_add(&counts[1], 1, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP);
  __syncthreads();
  int result = op == 0 ? counts[0] : op == 1 ? counts[0] > 0 : counts[1] == 0;
  __syncthreads();
  return result;
}
__R3_DEVICE int __syncthreads_count(int p) { return __r3_block_reduce(p, 0); }
__R3_DEVICE int __syncthreads_or(int p) { return __r3_block_reduce(p, 1); }
__R3_DEVICE int __syncthreads_and(int p) { return __r3_block_reduce(p, 2); }

/* atomics: relaxed, at the GPU's scope, as HIP's atomicXxx */
#define __R3_SCOPE __HIP_MEMORY_SCOPE_AGENT
template <typename T> struct __r3_same { typedef T type; };
#define __R3_V(T) typename __r3_same<T>::type
template <typename T> __R3_DEVICE T atomicAdd(T *a, __R3_V(T) v) {
  return __hip_atomic_fetch_add(a, v, __ATOMIC_RELAXED, __R3_SCOPE); }
template <typename T> __R3_DEVICE T atomicSub(T *a, __R3_V(T) v) {
  return __hip_atomic_fetch_sub(a, v, __ATOMIC_RELAXED, __R3_SCOPE); }
template <typename T> __R3_DEVICE T atomicExch(T *a, __R3_V(T) v) {
  return __hip_atomic_exchange(a, v, __ATOMIC_RELAXED, __R3_SCOPE); }
template <typename T> __R3_DEVICE T atomicMin(T *a, __R3_V(T) v) {
  return __hip_atomic_fetch_min(a, v, __ATOMIC_RELAXED, __R3_SCOPE); }
template <typename T> __R3_DEVICE T atomicMax(T *a, __R3_V(T) v) {
  return __hip_atomic_fetch_max(a, v, __ATOMIC_RELAXED, __R3_SCOPE); }
template <typename T> __R3_DEVICE T atomicAnd(T *a, __R3_V(T) v) {
  return __hip_atomic_fetch_and(a, v, __ATOMIC_RELAXED, __R3_SCOPE); }
template <typename T> __R3_DEVICE T atomicOr(T *a, __R3_V(T) v) {
  return __hip_atomic_fetch_or(a, v, __ATOMIC_RELAXED, __R3_SCOPE); }
template <typename T> __R3_DEVICE T atomicXor(T *a, __R3_V(T) v) {
  return __hip_atomic_fetch_xor(a, v, __ATOMIC_RELAXED, __R3_SCOPE); }
template <typename T> __R3_DEVICE T atomicCAS(T *a, __R3_V(T) compare, __R3_V(T) v) {
  __hip_atomic_compare_exchange_strong(a, &compare, v, __ATOMIC_RELAXED, __ATOMIC_RELAXED,
                                       __R3_SCOPE);
  return compare; }
__R3_DEVICE unsigned int atomicInc(unsigned int *a, unsigned int limit) {
  return __builtin_amdgcn_atomic_inc32(a, limit, __ATOMIC_RELAXED, "agent"); }
__R3_DEVICE unsigned int atomicDec(unsigned int *a, unsigned int limit) {
  return __builtin_amdgcn_atomic_dec32(a, limit, __ATOMIC_RELAXED, "agent"); }
#undef __R3_V
template <typename T> __R3_DEVICE T __ldg(const T *p) { return *p; }

/* bits and integers */
__R3_DEVICE int __popc(unsigned int x) { return __builtin_popcount(x); }
__R3_DEVICE int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
__R3_DEVICE int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned int)x); }
__R3_DEVICE int __clzll(long long x) {
  return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
__R3_DEVICE int __ffs(int x) { return __builtin_ffs(x); }
__R3_DEVICE int __ffsll(long long x) { return __builtin_ffsll(x); }
__R3_DEVICE unsigned int __brev(unsigned int x) { return __builtin_bitreverse32(x); }
__R3_DEVICE unsigned long long __brevll(unsigned long long x) {
  return __builtin_bitreverse64(x); }
__R3_DEVICE int __mul24(int a, int b) {
  return (int)((long long)((a << 8) >> 8) * (long long)((b << 8) >> 8)); }
__R3_DEVICE unsigned int __umul24(unsigned int a, unsigned int b) {
  return (a & 0xffffffu) * (b & 0xffffffu); }
__R3_DEVICE int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
__R3_DEVICE unsigned int __umulhi(unsigned int a, unsigned int b) {
  return (unsigned int)(((unsigned long long)a * b) >> 32); }
__R3_DEVICE int __float_as_int(float x) { return __builtin_bit_cast(int, x); }
__R3_DEVICE unsigned int __float_as_uint(float x) { return __builtin_bit_cast(unsigned int, x); }
__R3_DEVICE float __int_as_float(int x) { return __builtin_bit_cast(float, x); }
__R3_DEVICE float __uint_as_float(unsigned int x) { return __builtin_bit_cast(float, x); }
__R3_DEVICE long long __double_as_longlong(double x) { return __builtin_bit_cast(long long, x); }
__R3_DEVICE double __longlong_as_double(long long x) { return __builtin_bit_cast(double, x); }
#define __R3_MINMAX(type)                                                                  \
  __R3_DEVICE type min(type a, type b) { return a < b ? a : b; }                            \
  __R3_DEVICE type max(type a, type b) { return a > b ? a : b; }
__R3_MINMAX(int) __R3_MINMAX(unsigned int) __R3_MINMAX(long) __R3_MINMAX(unsigned long)
__R3_MINMAX(long long) __R3_MINMAX(unsigned long long)
#undef __R3_MINMAX
__R3_DEVICE float min(float a, float b) { return __builtin_fminf(a, b); }
__R3_DEVICE float max(float a, float b) { return __builtin_fmaxf(a, b); }
__R3_DEVICE double min(double a, double b) { return __builtin_fmin(a, b); }
__R3_DEVICE double max(double a, double b) { return __builtin_fmax(a, b); }
__R3_DEVICE int abs(int x) { return x < 0 ? -x : x; }

/* math the AMDGPU back end lowers itself, float and double */
#define __R3_EXACT(name)                                                                   \
  __R3_DEVICE float name##f(float x) { return __builtin_##name##f(x); }                    \
  __R3_DEVICE double name(double x) { return __builtin_##name(x); }                        \
  __R3_DEVICE float name(float x) { return __builtin_##name##f(x); }
__R3_EXACT(fabs) __R3_EXACT(floor) __R3_EXACT(ceil) __R3_EXACT(trunc) __R3_EXACT(round)
__R3_EXACT(rint) __R3_EXACT(nearbyint) __R3_EXACT(sqrt)
#undef __R3_EXACT
#define __R3_EXACT2(name)                                                                  \
  __R3_DEVICE float name##f(float a, float b) { return __builtin_##name##f(a, b); }        \
  __R3_DEVICE double name(double a, double b) { return __builtin_##name(a, b); }           \
  __R3_DEVICE float name(float a, float b) { return __builtin_##name##f(a, b); }
__R3_EXACT2(fmin) __R3_EXACT2(fmax) __R3_EXACT2(copysign)
#undef __R3_EXACT2
__R3_DEVICE float fmaf(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
__R3_DEVICE double fma(double a, double b, double c) { return __builtin_fma(a, b, c); }
__R3_DEVICE float fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
__R3_DEVICE float ldexpf(float x, int e) { return __builtin_ldexpf(x, e); }
__R3_DEVICE double ldexp(double x, int e) { return __builtin_ldexp(x, e); }
__R3_DEVICE float rsqrtf(float x) { return __builtin_amdgcn_rsqf(x); }
__R3_DEVICE double rsqrt(double x) { return 1.0 / __builtin_sqrt(x); }
__R3_DEVICE bool isnan(float x) { return __builtin_isnan(x); }
__R3_DEVICE bool isnan(double x) { return __builtin_isnan(x); }
__R3_DEVICE bool isinf(float x) { return __builtin_isinf(x); }
__R3_DEVICE bool isinf(double x) { return __builtin_isinf(x); }
__R3_DEVICE bool isfinite(float x) { return __builtin_isfinite(x); }
__R3_DEVICE bool isfinite(double x) { return __builtin_isfinite(x); }
/* float transcendentals: llvm.exp/log/sin/cos.f32, lowered by the back end */
#define __R3_LOWERED(name)                                                                 \
  __R3_DEVICE float name##f(float x) { return __builtin_##name##f(x); }                    \
  __R3_DEVICE float name(float x) { return __builtin_##name##f(x); }                       \
  __R3_DEVICE float __##name##f(float x) { return __builtin_##name##f(x); }
__R3_LOWERED(exp) __R3_LOWERED(exp2) __R3_LOWERED(log) __R3_LOWERED(log2)
__R3_LOWERED(log10) __R3_LOWERED(sin) __R3_LOWERED(cos)
#undef __R3_LOWERED
__R3_DEVICE float exp10f(float x) { return __builtin_exp2f(x * 3.3219280948873622f); }
__R3_DEVICE float __exp10f(float x) { return exp10f(x); }
__R3_DEVICE float tanf(float x) { return __builtin_sinf(x) / __builtin_cosf(x); }
__R3_DEVICE float tan(float x) { return tanf(x); }
__R3_DEVICE float __tanf(float x) { return tanf(x); }
__R3_DEVICE void sincosf(float x, float *s, float *c) { *s = sinf(x); *c = cosf(x); }
__R3_DEVICE void __sincosf(float x, float *s, float *c) { sincosf(x, s, c); }
__R3_DEVICE float powf(float x, float y) {
  if (y == 0.0f) return 1.0f;
  float magnitude = __builtin_exp2f(y * __builtin_log2f(__builtin_fabsf(x)));
  bool odd = __builtin_truncf(y) == y && __builtin_fmodf(y, 2.0f) != 0.0f;
  return x < 0.0f ? (__builtin_truncf(y) == y ? (odd ? -magnitude : magnitude)
                                              : __builtin_nanf(""))
                  : magnitude; }
__R3_DEVICE float pow(float x, float y) { return powf(x, y); }
__R3_DEVICE float __powf(float x, float y) { return powf(x, y); }
__R3_DEVICE float tanhf(float x) {
  float e = __builtin_expf(-2.0f * __builtin_fabsf(x));
  return __builtin_copysignf((1.0f - e) / (1.0f + e), x); }
__R3_DEVICE float tanh(float x) { return tanhf(x); }
/* double transcendentals would need ROCm's device libraries: refused where they are called
 * (never silently computed in float through the overloads above) */
#define __R3_NO_DOUBLE(name)                                                               \
  static __device__ double name(double) __attribute__((unavailable(                                       \
      "double-precision " #name " is not provided by pytest-r3's HIP build (ROCm's device " \
      "libraries are not used); compute in float or see docs/hip.md")));
__R3_NO_DOUBLE(exp) __R3_NO_DOUBLE(exp2) __R3_NO_DOUBLE(log) __R3_NO_DOUBLE(log2)
__R3_NO_DOUBLE(log10) __R3_NO_DOUBLE(sin) __R3_NO_DOUBLE(cos) __R3_NO_DOUBLE(tan)
__R3_NO_DOUBLE(tanh)
#undef __R3_NO_DOUBLE
__R3_DEVICE float __fdividef(float a, float b) { return a / b; }
__R3_DEVICE float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }

/* what cuda_fp16.h (shared with the CUDA build, see hip_device/hip/hip_fp16.h) asks of
 * the GPU, with the AMDGCN approximations */
__R3_DEVICE float __nvvm_sqrt_approx_f(float x) { return __builtin_sqrtf(x); }
__R3_DEVICE float __nvvm_rsqrt_approx_f(float x) { return __builtin_amdgcn_rsqf(x); }
__R3_DEVICE float __nvvm_rcp_approx_ftz_f(float x) { return __builtin_amdgcn_rcpf(x); }
__R3_DEVICE float __nvvm_ex2_approx_f(float x) { return __builtin_exp2f(x); }
__R3_DEVICE float __nvvm_lg2_approx_f(float x) { return __builtin_log2f(x); }

#define __R3_HIP_FN __R3_DEVICE
#define __R3_HIP_DECL static __device__
#define __R3_HIP_SHUFFLE(mask, v, lane, width, kind) __r3_shuffle(v, lane, width, kind)
#define __R3_HIP_BALLOT(mask, p) (__ballot(p) & (mask))
#include "r3_hip_shuffles.h"

#endif
#endif /* R3_HIP_H */
