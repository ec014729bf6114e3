/* cuda_fp16.h for pytest-r3's clang build: __half and __half2 (also `half`, `half2`) on
 * clang's _Float16, which the NVPTX back end turns into native f16 instructions (add.f16,
 * fma.rn.f16, cvt.rn.f16.f32...). Conversions, arithmetic, comparisons, the __h* functions,
 * the half2 pair operations, warp shuffles, __ldg and atomicAdd. Under nvcc, CUDA's own
 * cuda_fp16.h is used instead.
 */
#ifndef R3_CUDA_FP16_H
#define R3_CUDA_FP16_H
#ifdef R3_CUDA_CLANG /* pytest-r3's clang build (r3_cuda.h), not nvcc */

#define __R3_H static __host__ __device__ __forceinline__
#define __R3_HD __host__ __device__ __forceinline__

struct __half_raw { unsigned short x; };
struct __half2_raw { unsigned short x, y; };

struct __align__(2) __half {
  _Float16 __x;
  __half() = default;
  __R3_HD constexpr __half(_Float16 v) : __x(v) {}
  __R3_HD __half(__half_raw r) : __x(__builtin_bit_cast(_Float16, r.x)) {}
  __R3_HD __half(float v) : __x((_Float16)v) {}
  __R3_HD __half(double v) : __x((_Float16)v) {}
  __R3_HD __half(int v) : __x((_Float16)v) {}
  __R3_HD __half(unsigned int v) : __x((_Float16)v) {}
  __R3_HD __half(short v) : __x((_Float16)v) {}
  __R3_HD __half(unsigned short v) : __x((_Float16)v) {}
  __R3_HD __half(long long v) : __x((_Float16)v) {}
  __R3_HD __half(unsigned long long v) : __x((_Float16)v) {}
  __R3_HD operator float() const { return (float)__x; }
  __R3_HD operator __half_raw() const {
    return __half_raw{__builtin_bit_cast(unsigned short, __x)}; }
  __R3_HD __half &operator=(float v) { __x = (_Float16)v; return *this; }
  __R3_HD __half &operator=(double v) { __x = (_Float16)v; return *this; }
  __R3_HD __half &operator=(__half_raw r) {
    __x = __builtin_bit_cast(_Float16, r.x); return *this; }
};

struct __align__(4) __half2 {
  __half x, y;
  __half2() = default;
  __R3_HD constexpr __half2(__half a, __half b) : x(a), y(b) {}
  __R3_HD __half2(__half2_raw r)
      : x(__builtin_bit_cast(_Float16, r.x)), y(__builtin_bit_cast(_Float16, r.y)) {}
};

typedef __half half;
typedef __half2 half2;

/* pairs compute as two-lane vectors, which become f16x2 instructions */
typedef _Float16 __r3_h2v __attribute__((ext_vector_type(2)));
__R3_H __r3_h2v __r3_vec(__half2 a) { return __r3_h2v{a.x.__x, a.y.__x}; }
__R3_H __half2 __r3_pair(__r3_h2v v) { return __half2(__half(v.x), __half(v.y)); }

/* conversions */
__R3_H __half __float2half(float f) { return __half(f); }
__R3_H __half __float2half_rn(float f) { return __half(f); }
__R3_H __half __double2half(double f) { return __half(f); }
__R3_H float __half2float(__half h) { return (float)h.__x; }
__R3_H __half __int2half_rn(int i) { return __half(i); }
__R3_H __half __uint2half_rn(unsigned int i) { return __half(i); }
__R3_H __half __short2half_rn(short i) { return __half(i); }
__R3_H __half __ll2half_rn(long long i) { return __half(i); }
__R3_H int __half2int_rz(__half h) { return (int)h.__x; }
__R3_H int __half2int_rn(__half h) { return (int)__builtin_rintf((float)h.__x); }
__R3_H unsigned int __half2uint_rz(__half h) { return (unsigned int)h.__x; }
__R3_H short __half2short_rz(__half h) { return (short)h.__x; }
__R3_H long long __half2ll_rz(__half h) { return (long long)h.__x; }
__R3_H unsigned short __half_as_ushort(__half h) {
  return __builtin_bit_cast(unsigned short, h.__x); }
__R3_H short __half_as_short(__half h) { return __builtin_bit_cast(short, h.__x); }
__R3_H __half __ushort_as_half(unsigned short u) {
  return __half(__builtin_bit_cast(_Float16, u)); }
__R3_H __half __short_as_half(short u) { return __half(__builtin_bit_cast(_Float16, u)); }
__R3_H __half2 __floats2half2_rn(float a, float b) { return __half2(__half(a), __half(b)); }
__R3_H __half2 __float2half2_rn(float a) { return __half2(__half(a), __half(a)); }
__R3_H __half2 __float22half2_rn(float2 f) { return __half2(__half(f.x), __half(f.y)); }
__R3_H float2 __half22float2(__half2 h) {
  return make_float2((float)h.x.__x, (float)h.y.__x); }
__R3_H __half2 __half2half2(__half h) { return __half2(h, h); }
__R3_H __half2 __halves2half2(__half a, __half b) { return __half2(a, b); }
__R3_H __half __low2half(__half2 h) { return h.x; }
__R3_H __half __high2half(__half2 h) { return h.y; }
__R3_H float __low2float(__half2 h) { return (float)h.x.__x; }
__R3_H float __high2float(__half2 h) { return (float)h.y.__x; }
__R3_H __half2 __low2half2(__half2 h) { return __half2(h.x, h.x); }
__R3_H __half2 __high2half2(__half2 h) { return __half2(h.y, h.y); }
__R3_H __half2 __lows2half2(__half2 a, __half2 b) { return __half2(a.x, b.x); }
__R3_H __half2 __highs2half2(__half2 a, __half2 b) { return __half2(a.y, b.y); }
__R3_H __half2 __lowhigh2highlow(__half2 h) { return __half2(h.y, h.x); }

/* arithmetic on one half */
__R3_H __half __hadd(__half a, __half b) { return __half(a.__x + b.__x); }
__R3_H __half __hsub(__half a, __half b) { return __half(a.__x - b.__x); }
__R3_H __half __hmul(__half a, __half b) { return __half(a.__x * b.__x); }
__R3_H __half __hdiv(__half a, __half b) { return __half(a.__x / b.__x); }
__R3_H __half __hfma(__half a, __half b, __half c) {
  return __half(__builtin_elementwise_fma(a.__x, b.__x, c.__x)); }
__R3_H __half __hneg(__half a) { return __half(-a.__x); }
__R3_H __half __habs(__half a) { return __half(__builtin_elementwise_abs(a.__x)); }
__R3_H __half __hmax(__half a, __half b) { return __half(__builtin_elementwise_max(a.__x, b.__x)); }
__R3_H __half __hmin(__half a, __half b) { return __half(__builtin_elementwise_min(a.__x, b.__x)); }
__R3_H _Float16 __r3_sat(_Float16 v) {
  return v < (_Float16)0 ? (_Float16)0 : (v > (_Float16)1 ? (_Float16)1 : v); }
__R3_H __half __hadd_sat(__half a, __half b) { return __half(__r3_sat(a.__x + b.__x)); }
__R3_H __half __hmul_sat(__half a, __half b) { return __half(__r3_sat(a.__x * b.__x)); }
__R3_H __half __hfma_sat(__half a, __half b, __half c) {
  return __half(__r3_sat(__builtin_elementwise_fma(a.__x, b.__x, c.__x))); }
__R3_H bool __heq(__half a, __half b) { return a.__x == b.__x; }
__R3_H bool __hne(__half a, __half b) { return a.__x != b.__x; }
__R3_H bool __hlt(__half a, __half b) { return a.__x < b.__x; }
__R3_H bool __hle(__half a, __half b) { return a.__x <= b.__x; }
__R3_H bool __hgt(__half a, __half b) { return a.__x > b.__x; }
__R3_H bool __hge(__half a, __half b) { return a.__x >= b.__x; }
__R3_H bool __hisnan(__half a) { return a.__x != a.__x; }
__R3_H int __hisinf(__half a) {
  return a.__x == (_Float16)__builtin_inff() ? 1 : (a.__x == -(_Float16)__builtin_inff() ? -1 : 0); }

/* arithmetic on pairs */
__R3_H __half2 __hadd2(__half2 a, __half2 b) { return __r3_pair(__r3_vec(a) + __r3_vec(b)); }
__R3_H __half2 __hsub2(__half2 a, __half2 b) { return __r3_pair(__r3_vec(a) - __r3_vec(b)); }
__R3_H __half2 __hmul2(__half2 a, __half2 b) { return __r3_pair(__r3_vec(a) * __r3_vec(b)); }
__R3_H __half2 __h2div(__half2 a, __half2 b) { return __r3_pair(__r3_vec(a) / __r3_vec(b)); }
__R3_H __half2 __hfma2(__half2 a, __half2 b, __half2 c) {
  return __r3_pair(__builtin_elementwise_fma(__r3_vec(a), __r3_vec(b), __r3_vec(c))); }
__R3_H __half2 __hneg2(__half2 a) { return __r3_pair(-__r3_vec(a)); }
__R3_H __half2 __habs2(__half2 a) { return __r3_pair(__builtin_elementwise_abs(__r3_vec(a))); }
__R3_H __half2 __hmax2(__half2 a, __half2 b) {
  return __r3_pair(__builtin_elementwise_max(__r3_vec(a), __r3_vec(b))); }
__R3_H __half2 __hmin2(__half2 a, __half2 b) {
  return __r3_pair(__builtin_elementwise_min(__r3_vec(a), __r3_vec(b))); }

/* operators */
__R3_H __half operator+(__half a, __half b) { return __hadd(a, b); }
__R3_H __half operator-(__half a, __half b) { return __hsub(a, b); }
__R3_H __half operator*(__half a, __half b) { return __hmul(a, b); }
__R3_H __half operator/(__half a, __half b) { return __hdiv(a, b); }
__R3_H __half operator-(__half a) { return __hneg(a); }
__R3_H __half operator+(__half a) { return a; }
__R3_H __half &operator+=(__half &a, __half b) { return a = __hadd(a, b); }
__R3_H __half &operator-=(__half &a, __half b) { return a = __hsub(a, b); }
__R3_H __half &operator*=(__half &a, __half b) { return a = __hmul(a, b); }
__R3_H __half &operator/=(__half &a, __half b) { return a = __hdiv(a, b); }
__R3_H __half &operator++(__half &a) { return a = __hadd(a, __half(1.0f)); }
__R3_H __half &operator--(__half &a) { return a = __hsub(a, __half(1.0f)); }
__R3_H bool operator==(__half a, __half b) { return __heq(a, b); }
__R3_H bool operator!=(__half a, __half b) { return __hne(a, b); }
__R3_H bool operator<(__half a, __half b) { return __hlt(a, b); }
__R3_H bool operator<=(__half a, __half b) { return __hle(a, b); }
__R3_H bool operator>(__half a, __half b) { return __hgt(a, b); }
__R3_H bool operator>=(__half a, __half b) { return __hge(a, b); }
__R3_H __half2 operator+(__half2 a, __half2 b) { return __hadd2(a, b); }
__R3_H __half2 operator-(__half2 a, __half2 b) { return __hsub2(a, b); }
__R3_H __half2 operator*(__half2 a, __half2 b) { return __hmul2(a, b); }
__R3_H __half2 operator/(__half2 a, __half2 b) { return __h2div(a, b); }
__R3_H __half2 operator-(__half2 a) { return __hneg2(a); }
__R3_H __half2 &operator+=(__half2 &a, __half2 b) { return a = __hadd2(a, b); }
__R3_H __half2 &operator-=(__half2 &a, __half2 b) { return a = __hsub2(a, b); }
__R3_H __half2 &operator*=(__half2 &a, __half2 b) { return a = __hmul2(a, b); }
__R3_H __half2 &operator/=(__half2 &a, __half2 b) { return a = __h2div(a, b); }

/* math through float, with the same fast approximations as __expf and friends */
#define __R3_HMATH(name, pair, expression)                                                 \
  static __device__ __forceinline__ __half name(__half h) {                                \
    float x = (float)h.__x; return __half(expression); }                                   \
  static __device__ __forceinline__ __half2 pair(__half2 h) {                              \
    return __half2(name(h.x), name(h.y)); }
__R3_HMATH(hsqrt, h2sqrt, __nvvm_sqrt_approx_f(x))
__R3_HMATH(hrsqrt, h2rsqrt, __nvvm_rsqrt_approx_f(x))
__R3_HMATH(hrcp, h2rcp, __nvvm_rcp_approx_ftz_f(x))
__R3_HMATH(hexp, h2exp, __expf(x))
__R3_HMATH(hexp2, h2exp2, __nvvm_ex2_approx_f(x))
__R3_HMATH(hlog, h2log, __logf(x))
__R3_HMATH(hlog2, h2log2, __nvvm_lg2_approx_f(x))
__R3_HMATH(hlog10, h2log10, __nvvm_lg2_approx_f(x) * 0.30103f)
__R3_HMATH(hexp10, h2exp10, __nvvm_ex2_approx_f(x * 3.321928f))
__R3_HMATH(hsin, h2sin, __sinf(x))
__R3_HMATH(hcos, h2cos, __cosf(x))
__R3_HMATH(hfloor, h2floor, __builtin_floorf(x))
__R3_HMATH(hceil, h2ceil, __builtin_ceilf(x))
__R3_HMATH(htrunc, h2trunc, __builtin_truncf(x))
__R3_HMATH(hrint, h2rint, __builtin_rintf(x))
#undef __R3_HMATH

/* warp shuffles, read-only loads and atomics */
#ifndef R3_HOST_SHUFFLES /* CUDA emulation's shuffles take any type already */
#define __R3_HSHFL(name)                                                                   \
  static __device__ __forceinline__ __half name(unsigned int mask, __half v, int lane,     \
                                                int width = 32) {                          \
    return __ushort_as_half((unsigned short)name(mask, (unsigned int)__half_as_ushort(v),  \
                                                 lane, width)); }                          \
  static __device__ __forceinline__ __half2 name(unsigned int mask, __half2 v, int lane,   \
                                                 int width = 32) {                         \
    return __builtin_bit_cast(__half2, name(mask, __builtin_bit_cast(unsigned int, v),     \
                                            lane, width)); }
__R3_HSHFL(__shfl_sync)
__R3_HSHFL(__shfl_up_sync)
__R3_HSHFL(__shfl_down_sync)
__R3_HSHFL(__shfl_xor_sync)
#undef __R3_HSHFL
#endif
static __device__ __forceinline__ __half __ldg(const __half *p) {
  return __ushort_as_half(__ldg((const unsigned short *)p)); }
static __device__ __forceinline__ __half2 __ldg(const __half2 *p) {
  return __builtin_bit_cast(__half2, __ldg((const unsigned int *)p)); }
static __device__ __forceinline__ __half2 atomicAdd(__half2 *address, __half2 value) {
  unsigned int *word = (unsigned int *)address;
  unsigned int old = *word, assumed;
  do {
    assumed = old;
    __half2 sum = __hadd2(__builtin_bit_cast(__half2, assumed), value);
    old = atomicCAS(word, assumed, __builtin_bit_cast(unsigned int, sum));
  } while (old != assumed);
  return __builtin_bit_cast(__half2, old); }
static __device__ __forceinline__ __half atomicAdd(__half *address, __half value) {
  return __half(__atomic_fetch_add(&address->__x, value.__x, __ATOMIC_RELAXED)); }

#undef __R3_H
#undef __R3_HD
#endif
#endif /* R3_CUDA_FP16_H */
