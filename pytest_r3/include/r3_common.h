/* r3_common.h: helpers that are the same C++ on every GPU build and in emulation, written
 * once: CUDA's min/max overloads (for integers, mixed signed/unsigned pairs give the
 * unsigned type, as in CUDA), the SIMD-within-a-word min/max of 16-bit halves and bytes
 * (__vmins2, __vmaxu4...), bit counts and reversals, halving adds, sums of absolute
 * differences, funnel shifts, the reinterpretations of a value's bits (__float_as_int...)
 * and the loads and stores whose cache hint has no meaning here (__ldg's generic form,
 * __ldcg, __stcs...). r3_device.h (the CUDA and HIP device builds) and r3_cuda_host.h
 * (emulation, CUDA's and HIP's) include it after defining __R3_FN, the qualifiers of a
 * helper on their side.
 */
#ifndef R3_COMMON_H
#define R3_COMMON_H

#define __R3_MINMAX(result, a_type, b_type)                                                \
  __R3_FN result min(a_type a, b_type b) {                                                 \
    return (result)a < (result)b ? (result)a : (result)b; }                                \
  __R3_FN result max(a_type a, b_type b) {                                                 \
    return (result)a > (result)b ? (result)a : (result)b; }
#define __R3_MINMAX_SIGNS(s, u)                                                            \
  __R3_MINMAX(s, s, s) __R3_MINMAX(u, u, u) __R3_MINMAX(u, s, u) __R3_MINMAX(u, u, s)
__R3_MINMAX_SIGNS(int, unsigned int)
__R3_MINMAX_SIGNS(long, unsigned long)
__R3_MINMAX_SIGNS(long long, unsigned long long)
#undef __R3_MINMAX_SIGNS
#undef __R3_MINMAX
__R3_FN float min(float a, float b) { return __builtin_fminf(a, b); }
__R3_FN float max(float a, float b) { return __builtin_fmaxf(a, b); }
__R3_FN double min(double a, double b) { return __builtin_fmin(a, b); }
__R3_FN double max(double a, double b) { return __builtin_fmax(a, b); }

/* __vmins2(a, b): the minimum of each signed 16-bit half; u: unsigned; 4: of each byte */
#define __R3_SIMD_MINMAX(name, lane, lanes, builtin)                                       \
  __R3_FN unsigned int name(unsigned int a, unsigned int b) {                              \
    typedef lane vector __attribute__((ext_vector_type(lanes)));                           \
    return __builtin_bit_cast(unsigned int, builtin(__builtin_bit_cast(vector, a),         \
                                                    __builtin_bit_cast(vector, b))); }
__R3_SIMD_MINMAX(__vmins2, short, 2, __builtin_elementwise_min)
__R3_SIMD_MINMAX(__vminu2, unsigned short, 2, __builtin_elementwise_min)
__R3_SIMD_MINMAX(__vmaxs2, short, 2, __builtin_elementwise_max)
__R3_SIMD_MINMAX(__vmaxu2, unsigned short, 2, __builtin_elementwise_max)
__R3_SIMD_MINMAX(__vmins4, signed char, 4, __builtin_elementwise_min)
__R3_SIMD_MINMAX(__vminu4, unsigned char, 4, __builtin_elementwise_min)
__R3_SIMD_MINMAX(__vmaxs4, signed char, 4, __builtin_elementwise_max)
__R3_SIMD_MINMAX(__vmaxu4, unsigned char, 4, __builtin_elementwise_max)
#undef __R3_SIMD_MINMAX

/* bits: counts, the first set bit, reversals (__clz(0) is 32, as on the GPU) */
__R3_FN int __popc(unsigned int x) { return __builtin_popcount(x); }
__R3_FN int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
__R3_FN int __clz(int x) { return __builtin_clzg((unsigned int)x, 32); }
__R3_FN int __clzll(long long x) { return __builtin_clzg((unsigned long long)x, 64); }
__R3_FN int __ffs(int x) { return __builtin_ffs(x); }
__R3_FN int __ffsll(long long x) { return __builtin_ffsll(x); }
__R3_FN unsigned int __brev(unsigned int x) { return __builtin_bitreverse32(x); }
__R3_FN unsigned long long __brevll(unsigned long long x) { return __builtin_bitreverse64(x); }

/* halving adds and sums of absolute differences, in a type wide enough not to overflow
 * (a - b in int is undefined for far-apart ints) */
__R3_FN int __hadd(int a, int b) { return (int)(((long long)a + b) >> 1); }
__R3_FN int __rhadd(int a, int b) { return (int)(((long long)a + b + 1) >> 1); }
__R3_FN unsigned int __uhadd(unsigned int a, unsigned int b) {
  return (unsigned int)(((unsigned long long)a + b) >> 1); }
__R3_FN unsigned int __urhadd(unsigned int a, unsigned int b) {
  return (unsigned int)(((unsigned long long)a + b + 1) >> 1); }
__R3_FN unsigned int __sad(int a, int b, unsigned int c) {
  return c + (a > b ? (unsigned int)a - (unsigned int)b : (unsigned int)b - (unsigned int)a); }
__R3_FN unsigned int __usad(unsigned int a, unsigned int b, unsigned int c) {
  return c + (a > b ? a - b : b - a); }

/* funnel shifts of the 64 bits hi:lo, by the shift modulo 32 or clamped to 32 (c) */
__R3_FN unsigned int __funnelshift_l(unsigned int lo, unsigned int hi, unsigned int s) {
  return (unsigned int)(((((unsigned long long)hi << 32) | lo) << (s & 31)) >> 32); }
__R3_FN unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int s) {
  return (unsigned int)((((unsigned long long)hi << 32) | lo) >> (s & 31)); }
__R3_FN unsigned int __funnelshift_lc(unsigned int lo, unsigned int hi, unsigned int s) {
  return (unsigned int)(((((unsigned long long)hi << 32) | lo) << (s > 32 ? 32 : s)) >> 32); }
__R3_FN unsigned int __funnelshift_rc(unsigned int lo, unsigned int hi, unsigned int s) {
  return (unsigned int)((((unsigned long long)hi << 32) | lo) >> (s > 32 ? 32 : s)); }

/* 24-bit products and high halves: NVPTX has instructions for them (r3_cuda.h maps them
 * to NVVM builtins); elsewhere, the same arithmetic in C++ */
#ifndef __NVPTX__
__R3_FN int __mul24(int a, int b) {
  return (int)((long long)((a << 8) >> 8) * (long long)((b << 8) >> 8)); }
__R3_FN unsigned int __umul24(unsigned int a, unsigned int b) {
  return (a & 0xffffffu) * (b & 0xffffffu); }
__R3_FN int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
__R3_FN unsigned int __umulhi(unsigned int a, unsigned int b) {
  return (unsigned int)(((unsigned long long)a * b) >> 32); }
#endif

/* reinterpreting bits */
__R3_FN int __float_as_int(float x) { return __builtin_bit_cast(int, x); }
__R3_FN unsigned int __float_as_uint(float x) { return __builtin_bit_cast(unsigned int, x); }
__R3_FN float __int_as_float(int x) { return __builtin_bit_cast(float, x); }
__R3_FN float __uint_as_float(unsigned int x) { return __builtin_bit_cast(float, x); }
__R3_FN long long __double_as_longlong(double x) { return __builtin_bit_cast(long long, x); }
__R3_FN double __longlong_as_double(long long x) { return __builtin_bit_cast(double, x); }
__R3_FN int __double2hiint(double x) { return (int)(__builtin_bit_cast(long long, x) >> 32); }
__R3_FN int __double2loint(double x) { return (int)__builtin_bit_cast(long long, x); }
__R3_FN double __hiloint2double(int hi, int lo) {
  return __builtin_bit_cast(double, ((long long)hi << 32) | (unsigned int)lo); }

/* loads and stores: the generic __ldg (types without a read-only load of their own) and
 * the cache-hinted forms, whose hint is dropped: each is a plain access */
template <typename T> __R3_FN T __ldg(const T *p) { return *p; }
template <typename T> __R3_FN T __ldcg(const T *p) { return *p; }
template <typename T> __R3_FN T __ldca(const T *p) { return *p; }
template <typename T> __R3_FN T __ldcs(const T *p) { return *p; }
template <typename T> __R3_FN T __ldlu(const T *p) { return *p; }
template <typename T> __R3_FN T __ldcv(const T *p) { return *p; }
template <typename T> __R3_FN void __stcg(T *p, T v) { *p = v; }
template <typename T> __R3_FN void __stcs(T *p, T v) { *p = v; }
template <typename T> __R3_FN void __stwb(T *p, T v) { *p = v; }
template <typename T> __R3_FN void __stwt(T *p, T v) { *p = v; }

#endif /* R3_COMMON_H */
