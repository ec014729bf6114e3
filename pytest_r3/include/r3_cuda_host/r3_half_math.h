/* Host versions of what the device build's cuda_fp16.h / cuda_bf16.h ask of the GPU, for
 * CUDA emulation: the PTX approximations through the host's math library, and fused
 * multiply-adds on half and bfloat16 values (scalars and pairs) through float's, which the
 * host's code generator has no instruction or library call for. */
#ifndef R3_HOST_HALF_MATH_H
#define R3_HOST_HALF_MATH_H
#include <math.h>
static inline float __nvvm_sqrt_approx_f(float x) { return sqrtf(x); }
static inline float __nvvm_rsqrt_approx_f(float x) { return 1.0f / sqrtf(x); }
static inline float __nvvm_rcp_approx_ftz_f(float x) { return 1.0f / x; }
static inline float __nvvm_ex2_approx_f(float x) { return exp2f(x); }
static inline float __nvvm_lg2_approx_f(float x) { return log2f(x); }
static inline _Float16 __r3_host_fma(_Float16 a, _Float16 b, _Float16 c) {
  return (_Float16)__builtin_fmaf((float)a, (float)b, (float)c); }
static inline __bf16 __r3_host_fma(__bf16 a, __bf16 b, __bf16 c) {
  return (__bf16)__builtin_fmaf((float)a, (float)b, (float)c); }
template <typename V> static inline V __r3_host_fma(V a, V b, V c) {
  V r;
  r.x = __r3_host_fma(a.x, b.x, c.x);
  r.y = __r3_host_fma(a.y, b.y, c.y);
  return r; }
#define __builtin_elementwise_fma __r3_host_fma
#endif
