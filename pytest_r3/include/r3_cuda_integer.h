/* Integer helpers that are the same C++ on the GPU and in emulation, written once: CUDA's
 * min/max overloads for integers (mixed signed/unsigned pairs give the unsigned type, as
 * in CUDA) and the SIMD-within-a-word min/max of 16-bit halves and bytes (__vmins2,
 * __vmaxu4...). r3_cuda.h (device build) and r3_cuda_host.h (emulation) include it after
 * defining __R3_FN, the qualifiers of a helper on their side.
 */
#ifndef R3_CUDA_INTEGER_H
#define R3_CUDA_INTEGER_H

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

#endif /* R3_CUDA_INTEGER_H */
