/* r3_hip.h: the HIP vocabulary for kernels that pytest-r3 compiles with clang for AMD GPUs.
 *
 * pytest-r3 builds .hip files with `clang -x hip --cuda-device-only --offload-arch=gfx942
 * -nogpuinc -nogpulib`, which needs neither a GPU nor ROCm but also brings none of HIP's
 * headers or device libraries. This header supplies, on top of clang's AMDGCN builtins,
 * what hipcc gives device code: the qualifiers, threadIdx and friends (also the
 * hipThreadIdx_x spellings), __syncthreads, wavefront functions over 64 lanes, atomics, the
 * bit and conversion intrinsics and the float math that the AMDGPU back end lowers itself.
 * pytest-r3 includes it in front of every HIP kernel (-include); <hip/hip_runtime.h> and
 * the other headers kernels include are in hip/. What is the same C++ in the CUDA build
 * (qualifiers, threadIdx's shape, min/max, bits, the exact math) is in r3_device.h and
 * r3_common.h, which this header includes.
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

#define __launch_bounds__(...) __attribute__((amdgpu_flat_work_group_size(1, __R3_FIRST(__VA_ARGS__))))
#define __R3_FIRST(first, ...) first
#define HIP_DYNAMIC_SHARED(type, name) extern __shared__ type name[];
/* threadIdx and friends call the AMDGCN builtins */
#define __R3_THREAD_IDX(c) __builtin_amdgcn_workitem_id_##c()
#define __R3_BLOCK_IDX(c) __builtin_amdgcn_workgroup_id_##c()
#define __R3_BLOCK_DIM(c) __builtin_amdgcn_workgroup_size_##c()
#define __R3_GRID_DIM(c) (__builtin_amdgcn_grid_size_##c() / __builtin_amdgcn_workgroup_size_##c())
/* qualifiers, the CUDA build's vector types, threadIdx and friends, size_t, integer
 * helpers, min/max and the exact math: shared with the CUDA build */
#include "r3_device.h"
#define warpSize 64
#include "r3_hip_names.h"

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

/* bits, integers, min/max, abs and the exact math are in r3_device.h and r3_common.h */
__R3_DEVICE float sqrtf(float x) { return __builtin_sqrtf(x); }
__R3_DEVICE float sqrt(float x) { return __builtin_sqrtf(x); }
__R3_DEVICE double sqrt(double x) { return __builtin_sqrt(x); }
__R3_DEVICE float rsqrtf(float x) { return __builtin_amdgcn_rsqf(x); }
__R3_DEVICE double rsqrt(double x) { return 1.0 / __builtin_sqrt(x); }
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

/* what cuda_fp16.h (shared with the CUDA build, see hip/hip_fp16.h) asks of
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
