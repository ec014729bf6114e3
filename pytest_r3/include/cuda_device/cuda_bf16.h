/* cuda_bf16.h for pytest-r3's clang build: __nv_bfloat16 and __nv_bfloat162 (also
 * `nv_bfloat16`, `nv_bfloat162`) on clang's __bf16, the same functions as for __half under
 * their bfloat16 names (__float2bfloat16, __bfloat162float, __floats2bfloat162_rn...) and
 * the shared ones (__hadd, __hfma2, hexp...) overloaded for bfloat16. Arithmetic rounds to
 * bfloat16 after each operation; sm_80 and newer have native bf16x2 fma, max and min.
 * Under nvcc, CUDA's own cuda_bf16.h is used instead.
 */
#ifndef R3_CUDA_BF16_H
#define R3_CUDA_BF16_H
#ifdef R3_CUDA_CLANG /* pytest-r3's clang build (r3_cuda.h), not nvcc */

#define __R3_H static __host__ __device__ __forceinline__
#define __R3_HD __host__ __device__ __forceinline__

struct __nv_bfloat16_raw { unsigned short x; };
struct __nv_bfloat162_raw { unsigned short x, y; };

struct __align__(2) __nv_bfloat16 {
  __bf16 __x;
  __nv_bfloat16() = default;
  __R3_HD constexpr __nv_bfloat16(__bf16 v) : __x(v) {}
  __R3_HD __nv_bfloat16(__nv_bfloat16_raw r) : __x(__builtin_bit_cast(__bf16, r.x)) {}
  __R3_HD __nv_bfloat16(float v) : __x((__bf16)v) {}
  __R3_HD __nv_bfloat16(double v) : __x((__bf16)v) {}
  __R3_HD __nv_bfloat16(int v) : __x((__bf16)v) {}
  __R3_HD __nv_bfloat16(unsigned int v) : __x((__bf16)v) {}
  __R3_HD __nv_bfloat16(short v) : __x((__bf16)v) {}
  __R3_HD __nv_bfloat16(unsigned short v) : __x((__bf16)v) {}
  __R3_HD __nv_bfloat16(long long v) : __x((__bf16)v) {}
  __R3_HD __nv_bfloat16(unsigned long long v) : __x((__bf16)v) {}
  __R3_HD operator float() const { return (float)__x; }
  __R3_HD operator __nv_bfloat16_raw() const {
    return __nv_bfloat16_raw{__builtin_bit_cast(unsigned short, __x)}; }
  __R3_HD __nv_bfloat16 &operator=(float v) { __x = (__bf16)v; return *this; }
  __R3_HD __nv_bfloat16 &operator=(double v) { __x = (__bf16)v; return *this; }
  __R3_HD __nv_bfloat16 &operator=(__nv_bfloat16_raw r) {
    __x = __builtin_bit_cast(__bf16, r.x); return *this; }
};

struct __align__(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
  __nv_bfloat162() = default;
  __R3_HD constexpr __nv_bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) : x(a), y(b) {}
  __R3_HD __nv_bfloat162(__nv_bfloat162_raw r)
      : x(__builtin_bit_cast(__bf16, r.x)), y(__builtin_bit_cast(__bf16, r.y)) {}
};

typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;

/* pairs compute as two-lane vectors, which become f16x2 instructions */
typedef __bf16 __r3_bf2v __attribute__((ext_vector_type(2)));
__R3_H __r3_bf2v __r3_vec(__nv_bfloat162 a) { return __r3_bf2v{a.x.__x, a.y.__x}; }
__R3_H __nv_bfloat162 __r3_pair(__r3_bf2v v) { return __nv_bfloat162(__nv_bfloat16(v.x), __nv_bfloat16(v.y)); }

/* conversions */
__R3_H __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
__R3_H __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
__R3_H __nv_bfloat16 __double2bfloat16(double f) { return __nv_bfloat16(f); }
__R3_H float __bfloat162float(__nv_bfloat16 h) { return (float)h.__x; }
__R3_H __nv_bfloat16 __int2bfloat16_rn(int i) { return __nv_bfloat16(i); }
__R3_H __nv_bfloat16 __uint2bfloat16_rn(unsigned int i) { return __nv_bfloat16(i); }
__R3_H __nv_bfloat16 __short2bfloat16_rn(short i) { return __nv_bfloat16(i); }
__R3_H __nv_bfloat16 __ll2bfloat16_rn(long long i) { return __nv_bfloat16(i); }
__R3_H int __bfloat162int_rz(__nv_bfloat16 h) { return (int)h.__x; }
__R3_H int __bfloat162int_rn(__nv_bfloat16 h) { return (int)__builtin_rintf((float)h.__x); }
__R3_H unsigned int __bfloat162uint_rz(__nv_bfloat16 h) { return (unsigned int)h.__x; }
__R3_H short __bfloat162short_rz(__nv_bfloat16 h) { return (short)h.__x; }
__R3_H long long __bfloat162ll_rz(__nv_bfloat16 h) { return (long long)h.__x; }
__R3_H unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) {
  return __builtin_bit_cast(unsigned short, h.__x); }
__R3_H short __bfloat16_as_short(__nv_bfloat16 h) { return __builtin_bit_cast(short, h.__x); }
__R3_H __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) {
  return __nv_bfloat16(__builtin_bit_cast(__bf16, u)); }
__R3_H __nv_bfloat16 __short_as_bfloat16(short u) { return __nv_bfloat16(__builtin_bit_cast(__bf16, u)); }
__R3_H __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return __nv_bfloat162(__nv_bfloat16(a), __nv_bfloat16(b)); }
__R3_H __nv_bfloat162 __float2bfloat162_rn(float a) { return __nv_bfloat162(__nv_bfloat16(a), __nv_bfloat16(a)); }
__R3_H __nv_bfloat162 __float22bfloat162_rn(float2 f) { return __nv_bfloat162(__nv_bfloat16(f.x), __nv_bfloat16(f.y)); }
__R3_H float2 __bfloat1622float2(__nv_bfloat162 h) {
  return make_float2((float)h.x.__x, (float)h.y.__x); }
__R3_H __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 h) { return __nv_bfloat162(h, h); }
__R3_H __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat162(a, b); }
__R3_H __nv_bfloat16 __low2bfloat16(__nv_bfloat162 h) { return h.x; }
__R3_H __nv_bfloat16 __high2bfloat16(__nv_bfloat162 h) { return h.y; }
__R3_H float __low2float(__nv_bfloat162 h) { return (float)h.x.__x; }
__R3_H float __high2float(__nv_bfloat162 h) { return (float)h.y.__x; }
__R3_H __nv_bfloat162 __low2bfloat162(__nv_bfloat162 h) { return __nv_bfloat162(h.x, h.x); }
__R3_H __nv_bfloat162 __high2bfloat162(__nv_bfloat162 h) { return __nv_bfloat162(h.y, h.y); }
__R3_H __nv_bfloat162 __lows2bfloat162(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162(a.x, b.x); }
__R3_H __nv_bfloat162 __highs2bfloat162(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162(a.y, b.y); }
__R3_H __nv_bfloat162 __lowhigh2highlow(__nv_bfloat162 h) { return __nv_bfloat162(h.y, h.x); }

/* arithmetic on one half */
__R3_H __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(a.__x + b.__x); }
__R3_H __nv_bfloat16 __hsub(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(a.__x - b.__x); }
__R3_H __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(a.__x * b.__x); }
__R3_H __nv_bfloat16 __hdiv(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(a.__x / b.__x); }
__R3_H __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
  return __nv_bfloat16(__builtin_elementwise_fma(a.__x, b.__x, c.__x)); }
__R3_H __nv_bfloat16 __hneg(__nv_bfloat16 a) { return __nv_bfloat16(-a.__x); }
__R3_H __nv_bfloat16 __habs(__nv_bfloat16 a) { return __nv_bfloat16(__builtin_elementwise_abs(a.__x)); }
__R3_H __nv_bfloat16 __hmax(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(__builtin_elementwise_max(a.__x, b.__x)); }
__R3_H __nv_bfloat16 __hmin(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(__builtin_elementwise_min(a.__x, b.__x)); }
__R3_H __bf16 __r3_sat(__bf16 v) {
  return v < (__bf16)0 ? (__bf16)0 : (v > (__bf16)1 ? (__bf16)1 : v); }
__R3_H __nv_bfloat16 __hadd_sat(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(__r3_sat(a.__x + b.__x)); }
__R3_H __nv_bfloat16 __hmul_sat(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(__r3_sat(a.__x * b.__x)); }
__R3_H __nv_bfloat16 __hfma_sat(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
  return __nv_bfloat16(__r3_sat(__builtin_elementwise_fma(a.__x, b.__x, c.__x))); }
__R3_H bool __heq(__nv_bfloat16 a, __nv_bfloat16 b) { return a.__x == b.__x; }
__R3_H bool __hne(__nv_bfloat16 a, __nv_bfloat16 b) { return a.__x != b.__x; }
__R3_H bool __hlt(__nv_bfloat16 a, __nv_bfloat16 b) { return a.__x < b.__x; }
__R3_H bool __hle(__nv_bfloat16 a, __nv_bfloat16 b) { return a.__x <= b.__x; }
__R3_H bool __hgt(__nv_bfloat16 a, __nv_bfloat16 b) { return a.__x > b.__x; }
__R3_H bool __hge(__nv_bfloat16 a, __nv_bfloat16 b) { return a.__x >= b.__x; }
__R3_H bool __hisnan(__nv_bfloat16 a) { return a.__x != a.__x; }
__R3_H int __hisinf(__nv_bfloat16 a) {
  return a.__x == (__bf16)__builtin_inff() ? 1 : (a.__x == -(__bf16)__builtin_inff() ? -1 : 0); }

/* arithmetic on pairs */
__R3_H __nv_bfloat162 __hadd2(__nv_bfloat162 a, __nv_bfloat162 b) { return __r3_pair(__r3_vec(a) + __r3_vec(b)); }
__R3_H __nv_bfloat162 __hsub2(__nv_bfloat162 a, __nv_bfloat162 b) { return __r3_pair(__r3_vec(a) - __r3_vec(b)); }
__R3_H __nv_bfloat162 __hmul2(__nv_bfloat162 a, __nv_bfloat162 b) { return __r3_pair(__r3_vec(a) * __r3_vec(b)); }
__R3_H __nv_bfloat162 __h2div(__nv_bfloat162 a, __nv_bfloat162 b) { return __r3_pair(__r3_vec(a) / __r3_vec(b)); }
__R3_H __nv_bfloat162 __hfma2(__nv_bfloat162 a, __nv_bfloat162 b, __nv_bfloat162 c) {
  return __r3_pair(__builtin_elementwise_fma(__r3_vec(a), __r3_vec(b), __r3_vec(c))); }
__R3_H __nv_bfloat162 __hneg2(__nv_bfloat162 a) { return __r3_pair(-__r3_vec(a)); }
__R3_H __nv_bfloat162 __habs2(__nv_bfloat162 a) { return __r3_pair(__builtin_elementwise_abs(__r3_vec(a))); }
__R3_H __nv_bfloat162 __hmax2(__nv_bfloat162 a, __nv_bfloat162 b) {
  return __r3_pair(__builtin_elementwise_max(__r3_vec(a), __r3_vec(b))); }
__R3_H __nv_bfloat162 __hmin2(__nv_bfloat162 a, __nv_bfloat162 b) {
  return __r3_pair(__builtin_elementwise_min(__r3_vec(a), __r3_vec(b))); }

/* operators */
__R3_H __nv_bfloat16 operator+(__nv_bfloat16 a, __nv_bfloat16 b) { return __hadd(a, b); }
__R3_H __nv_bfloat16 operator-(__nv_bfloat16 a, __nv_bfloat16 b) { return __hsub(a, b); }
__R3_H __nv_bfloat16 operator*(__nv_bfloat16 a, __nv_bfloat16 b) { return __hmul(a, b); }
__R3_H __nv_bfloat16 operator/(__nv_bfloat16 a, __nv_bfloat16 b) { return __hdiv(a, b); }
__R3_H __nv_bfloat16 operator-(__nv_bfloat16 a) { return __hneg(a); }
__R3_H __nv_bfloat16 operator+(__nv_bfloat16 a) { return a; }
__R3_H __nv_bfloat16 &operator+=(__nv_bfloat16 &a, __nv_bfloat16 b) { return a = __hadd(a, b); }
__R3_H __nv_bfloat16 &operator-=(__nv_bfloat16 &a, __nv_bfloat16 b) { return a = __hsub(a, b); }
__R3_H __nv_bfloat16 &operator*=(__nv_bfloat16 &a, __nv_bfloat16 b) { return a = __hmul(a, b); }
__R3_H __nv_bfloat16 &operator/=(__nv_bfloat16 &a, __nv_bfloat16 b) { return a = __hdiv(a, b); }
__R3_H __nv_bfloat16 &operator++(__nv_bfloat16 &a) { return a = __hadd(a, __nv_bfloat16(1.0f)); }
__R3_H __nv_bfloat16 &operator--(__nv_bfloat16 &a) { return a = __hsub(a, __nv_bfloat16(1.0f)); }
__R3_H bool operator==(__nv_bfloat16 a, __nv_bfloat16 b) { return __heq(a, b); }
__R3_H bool operator!=(__nv_bfloat16 a, __nv_bfloat16 b) { return __hne(a, b); }
__R3_H bool operator<(__nv_bfloat16 a, __nv_bfloat16 b) { return __hlt(a, b); }
__R3_H bool operator<=(__nv_bfloat16 a, __nv_bfloat16 b) { return __hle(a, b); }
__R3_H bool operator>(__nv_bfloat16 a, __nv_bfloat16 b) { return __hgt(a, b); }
__R3_H bool operator>=(__nv_bfloat16 a, __nv_bfloat16 b) { return __hge(a, b); }
__R3_H __nv_bfloat162 operator+(__nv_bfloat162 a, __nv_bfloat162 b) { return __hadd2(a, b); }
__R3_H __nv_bfloat162 operator-(__nv_bfloat162 a, __nv_bfloat162 b) { return __hsub2(a, b); }
__R3_H __nv_bfloat162 operator*(__nv_bfloat162 a, __nv_bfloat162 b) { return __hmul2(a, b); }
__R3_H __nv_bfloat162 operator/(__nv_bfloat162 a, __nv_bfloat162 b) { return __h2div(a, b); }
__R3_H __nv_bfloat162 operator-(__nv_bfloat162 a) { return __hneg2(a); }
__R3_H __nv_bfloat162 &operator+=(__nv_bfloat162 &a, __nv_bfloat162 b) { return a = __hadd2(a, b); }
__R3_H __nv_bfloat162 &operator-=(__nv_bfloat162 &a, __nv_bfloat162 b) { return a = __hsub2(a, b); }
__R3_H __nv_bfloat162 &operator*=(__nv_bfloat162 &a, __nv_bfloat162 b) { return a = __hmul2(a, b); }
__R3_H __nv_bfloat162 &operator/=(__nv_bfloat162 &a, __nv_bfloat162 b) { return a = __h2div(a, b); }

/* math through float, with the same fast approximations as __expf and friends */
#define __R3_BFMATH(name, pair, expression)                                                 \
  static __device__ __forceinline__ __nv_bfloat16 name(__nv_bfloat16 h) {                                \
    float x = (float)h.__x; return __nv_bfloat16(expression); }                                   \
  static __device__ __forceinline__ __nv_bfloat162 pair(__nv_bfloat162 h) {                              \
    return __nv_bfloat162(name(h.x), name(h.y)); }
__R3_BFMATH(hsqrt, h2sqrt, __nvvm_sqrt_approx_f(x))
__R3_BFMATH(hrsqrt, h2rsqrt, __nvvm_rsqrt_approx_f(x))
__R3_BFMATH(hrcp, h2rcp, __nvvm_rcp_approx_ftz_f(x))
__R3_BFMATH(hexp, h2exp, __expf(x))
__R3_BFMATH(hexp2, h2exp2, __nvvm_ex2_approx_f(x))
__R3_BFMATH(hlog, h2log, __logf(x))
__R3_BFMATH(hlog2, h2log2, __nvvm_lg2_approx_f(x))
__R3_BFMATH(hlog10, h2log10, __nvvm_lg2_approx_f(x) * 0.30103f)
__R3_BFMATH(hexp10, h2exp10, __nvvm_ex2_approx_f(x * 3.321928f))
__R3_BFMATH(hsin, h2sin, __sinf(x))
__R3_BFMATH(hcos, h2cos, __cosf(x))
__R3_BFMATH(hfloor, h2floor, __builtin_floorf(x))
__R3_BFMATH(hceil, h2ceil, __builtin_ceilf(x))
__R3_BFMATH(htrunc, h2trunc, __builtin_truncf(x))
__R3_BFMATH(hrint, h2rint, __builtin_rintf(x))
#undef __R3_BFMATH

/* warp shuffles, read-only loads and atomics */
#ifndef R3_HOST_SHUFFLES /* CUDA emulation's shuffles take any type already */
#define __R3_BFSHFL(name)                                                                   \
  static __device__ __forceinline__ __nv_bfloat16 name(unsigned int mask, __nv_bfloat16 v, int lane,     \
                                                int width = 32) {                          \
    return __ushort_as_bfloat16((unsigned short)name(mask, (unsigned int)__bfloat16_as_ushort(v),  \
                                                 lane, width)); }                          \
  static __device__ __forceinline__ __nv_bfloat162 name(unsigned int mask, __nv_bfloat162 v, int lane,   \
                                                 int width = 32) {                         \
    return __builtin_bit_cast(__nv_bfloat162, name(mask, __builtin_bit_cast(unsigned int, v),     \
                                            lane, width)); }
__R3_BFSHFL(__shfl_sync)
__R3_BFSHFL(__shfl_up_sync)
__R3_BFSHFL(__shfl_down_sync)
__R3_BFSHFL(__shfl_xor_sync)
#undef __R3_BFSHFL
#endif
static __device__ __forceinline__ __nv_bfloat16 __ldg(const __nv_bfloat16 *p) {
  return __ushort_as_bfloat16(__ldg((const unsigned short *)p)); }
static __device__ __forceinline__ __nv_bfloat162 __ldg(const __nv_bfloat162 *p) {
  return __builtin_bit_cast(__nv_bfloat162, __ldg((const unsigned int *)p)); }
static __device__ __forceinline__ __nv_bfloat162 atomicAdd(__nv_bfloat162 *address, __nv_bfloat162 value) {
  unsigned int *word = (unsigned int *)address;
  unsigned int old = *word, assumed;
  do {
    assumed = old;
    __nv_bfloat162 sum = __hadd2(__builtin_bit_cast(__nv_bfloat162, assumed), value);
    old = atomicCAS(word, assumed, __builtin_bit_cast(unsigned int, sum));
  } while (old != assumed);
  return __builtin_bit_cast(__nv_bfloat162, old); }
static __device__ __forceinline__ __nv_bfloat16 atomicAdd(__nv_bfloat16 *address, __nv_bfloat16 value) {
  return __nv_bfloat16(__atomic_fetch_add(&address->__x, value.__x, __ATOMIC_RELAXED)); }

#undef __R3_H
#undef __R3_HD
#endif
#endif /* R3_CUDA_BF16_H */
