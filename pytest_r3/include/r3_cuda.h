/* r3_cuda.h: the CUDA vocabulary for kernels that pytest-r3 compiles with clang.
 *
 * pytest-r3 builds .cu files with `clang -x cuda --cuda-device-only -nocudainc -nocudalib`,
 * which needs neither a GPU nor the CUDA toolkit but also brings none of CUDA's headers.
 * This header supplies, on top of clang's NVPTX builtins, what nvcc gives device code with
 * no include: the qualifiers, threadIdx and friends, vector types (cuda_device/
 * vector_types.h), synchronisation, warp functions, atomics, __ldg, the bit, conversion and
 * rounding-mode intrinsics, fast-math intrinsics, math functions, printf. Each maps to the
 * NVVM builtin that gives the instruction nvcc emits (rsqrtf -> rsqrt.approx, __ldg ->
 * ld.global.nc, __expf -> ex2.approx), never to inline assembly, which tuning candidates may
 * not contain. pytest-r3 includes it in front of every CUDA kernel (-include); the headers
 * kernels include themselves (cuda_fp16.h, <cstdio>...) are in cuda_device/. What is the
 * same C++ in the HIP build (qualifiers, threadIdx's shape, min/max, bits, the exact math)
 * is in r3_device.h and r3_common.h, which this header includes.
 *
 * Under nvcc, or clang with CUDA's own headers, this file is empty: the same source then
 * builds against the real CUDA runtime headers (the vendor baseline does that).
 *
 * Math: with CUDA's libdevice available (R3_LIBDEVICE defined by pytest-r3), math functions
 * call libdevice's __nv_* implementations, the ones nvcc uses. Without it, sqrt, fma,
 * fabs, fmin/fmax, floor/ceil/trunc/round and division are exact (IEEE) as usual, while
 * the float exp, log, sin, cos, tan, pow and tanh use the hardware approximations (as nvcc
 * does with -use_fast_math), and the other functions are unavailable (a compile error
 * saying libdevice is needed).
 */
#ifndef R3_CUDA_H
#define R3_CUDA_H
#if defined(__clang__) && defined(__CUDA__) && !defined(__CUDACC__)

#define R3_CUDA_CLANG 1
/* as under nvcc, so that `#ifdef __CUDACC__` sections of shared headers are compiled */
#define __CUDACC__ 1

#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define __grid_constant__ __attribute__((grid_constant))
/* threadIdx and friends read the PTX special registers */
#define __R3_THREAD_IDX(c) __nvvm_read_ptx_sreg_tid_##c()
#define __R3_BLOCK_IDX(c) __nvvm_read_ptx_sreg_ctaid_##c()
#define __R3_BLOCK_DIM(c) __nvvm_read_ptx_sreg_ntid_##c()
#define __R3_GRID_DIM(c) __nvvm_read_ptx_sreg_nctaid_##c()
/* qualifiers, vector types (cuda_device/vector_types.h), threadIdx and friends, size_t,
 * integer helpers, min/max and the exact math: shared with the HIP build */
#include "r3_device.h"
#define warpSize 32
typedef __SIZE_TYPE__ __r3_size_t;

/* synchronisation (__syncthreads itself is a clang builtin in CUDA mode) */
__R3_DEVICE int __syncthreads_count(int p) { return __nvvm_bar0_popc(p); }
__R3_DEVICE int __syncthreads_and(int p) { return __nvvm_bar0_and(p); }
__R3_DEVICE int __syncthreads_or(int p) { return __nvvm_bar0_or(p); }
__R3_DEVICE void __syncwarp(unsigned int mask = 0xffffffffu) { __nvvm_bar_warp_sync(mask); }
__R3_DEVICE void __threadfence_block() { __nvvm_membar_cta(); }
__R3_DEVICE void __threadfence() { __nvvm_membar_gl(); }
__R3_DEVICE void __threadfence_system() { __nvvm_membar_sys(); }

/* warp shuffles, votes, matches and reductions */
#define __R3_SHFL(name, kind, clamp)                                                       \
  __R3_DEVICE int name(unsigned int mask, int v, int lane, int width = 32) {               \
    return __nvvm_shfl_sync_##kind##_i32(mask, v, lane, clamp); }                          \
  __R3_DEVICE unsigned int name(unsigned int mask, unsigned int v, int lane,               \
                                int width = 32) {                                          \
    return (unsigned int)__nvvm_shfl_sync_##kind##_i32(mask, (int)v, lane, clamp); }       \
  __R3_DEVICE float name(unsigned int mask, float v, int lane, int width = 32) {           \
    return __nvvm_shfl_sync_##kind##_f32(mask, v, lane, clamp); }                          \
  __R3_DEVICE long long name(unsigned int mask, long long v, int lane, int width = 32) {   \
    int lo = __nvvm_shfl_sync_##kind##_i32(mask, (int)v, lane, clamp);                     \
    int hi = __nvvm_shfl_sync_##kind##_i32(mask, (int)(v >> 32), lane, clamp);             \
    return ((long long)hi << 32) | (unsigned int)lo; }                                     \
  __R3_DEVICE unsigned long long name(unsigned int mask, unsigned long long v, int lane,   \
                                      int width = 32) {                                    \
    return (unsigned long long)name(mask, (long long)v, lane, width); }                    \
  __R3_DEVICE long name(unsigned int mask, long v, int lane, int width = 32) {             \
    return (long)name(mask, (long long)v, lane, width); }                                  \
  __R3_DEVICE unsigned long name(unsigned int mask, unsigned long v, int lane,             \
                                 int width = 32) {                                         \
    return (unsigned long)name(mask, (long long)v, lane, width); }                         \
  __R3_DEVICE double name(unsigned int mask, double v, int lane, int width = 32) {         \
    return __builtin_bit_cast(double,                                                      \
                              name(mask, __builtin_bit_cast(long long, v), lane, width)); }
__R3_SHFL(__shfl_sync, idx, ((32 - width) << 8) | 0x1f)
__R3_SHFL(__shfl_up_sync, up, (32 - width) << 8)
__R3_SHFL(__shfl_down_sync, down, ((32 - width) << 8) | 0x1f)
__R3_SHFL(__shfl_xor_sync, bfly, ((32 - width) << 8) | 0x1f)
#undef __R3_SHFL
__R3_DEVICE int __all_sync(unsigned int mask, int p) { return __nvvm_vote_all_sync(mask, p); }
__R3_DEVICE int __any_sync(unsigned int mask, int p) { return __nvvm_vote_any_sync(mask, p); }
__R3_DEVICE int __uni_sync(unsigned int mask, int p) { return __nvvm_vote_uni_sync(mask, p); }
__R3_DEVICE unsigned int __ballot_sync(unsigned int mask, int p) {
  return __nvvm_vote_ballot_sync(mask, p); }
__R3_DEVICE unsigned int __activemask() { return __nvvm_activemask(); }
__R3_DEVICE unsigned int __match_any_sync(unsigned int mask, int v) {
  return __nvvm_match_any_sync_i32(mask, v); }
__R3_DEVICE unsigned int __match_any_sync(unsigned int mask, unsigned int v) {
  return __nvvm_match_any_sync_i32(mask, (int)v); }
__R3_DEVICE unsigned int __match_any_sync(unsigned int mask, long long v) {
  return __nvvm_match_any_sync_i64(mask, v); }
__R3_DEVICE unsigned int __match_any_sync(unsigned int mask, unsigned long long v) {
  return __nvvm_match_any_sync_i64(mask, (long long)v); }
#define __R3_MATCH_ALL(type, builtin, cast)                                                 \
  __R3_DEVICE unsigned int __match_all_sync(unsigned int mask, type v, int *pred) {        \
    return builtin(mask, (cast)v, pred); }
__R3_MATCH_ALL(int, __nvvm_match_all_sync_i32p, int)
__R3_MATCH_ALL(unsigned int, __nvvm_match_all_sync_i32p, int)
__R3_MATCH_ALL(long long, __nvvm_match_all_sync_i64p, long long)
__R3_MATCH_ALL(unsigned long long, __nvvm_match_all_sync_i64p, long long)
#undef __R3_MATCH_ALL
/* named barriers (bar.sync id[, count]); __fns: the n-th set bit of a mask from a base lane */
__R3_DEVICE void __barrier_sync(unsigned int id) { __nvvm_barrier_sync(id); }
__R3_DEVICE void __barrier_sync_count(unsigned int id, unsigned int count) {
  __nvvm_barrier_sync_cnt(id, count); }
__R3_DEVICE unsigned int __fns(unsigned int mask, unsigned int base, int offset) {
  unsigned int lane;
  asm("fns.b32 %0, %1, %2, %3;" : "=r"(lane) : "r"(mask), "r"(base), "r"(offset));
  return lane; }
#if __CUDA_ARCH__ >= 800
__R3_DEVICE int __reduce_add_sync(unsigned int mask, int v) {
  return __nvvm_redux_sync_add(v, mask); }
__R3_DEVICE unsigned int __reduce_add_sync(unsigned int mask, unsigned int v) {
  return (unsigned int)__nvvm_redux_sync_add((int)v, mask); }
__R3_DEVICE int __reduce_min_sync(unsigned int mask, int v) {
  return __nvvm_redux_sync_min(v, mask); }
__R3_DEVICE unsigned int __reduce_min_sync(unsigned int mask, unsigned int v) {
  return __nvvm_redux_sync_umin(v, mask); }
__R3_DEVICE int __reduce_max_sync(unsigned int mask, int v) {
  return __nvvm_redux_sync_max(v, mask); }
__R3_DEVICE unsigned int __reduce_max_sync(unsigned int mask, unsigned int v) {
  return __nvvm_redux_sync_umax(v, mask); }
__R3_DEVICE unsigned int __reduce_and_sync(unsigned int mask, unsigned int v) {
  return (unsigned int)__nvvm_redux_sync_and((int)v, mask); }
__R3_DEVICE unsigned int __reduce_or_sync(unsigned int mask, unsigned int v) {
  return (unsigned int)__nvvm_redux_sync_or((int)v, mask); }
__R3_DEVICE unsigned int __reduce_xor_sync(unsigned int mask, unsigned int v) {
  return (unsigned int)__nvvm_redux_sync_xor((int)v, mask); }
#endif

/* atomics: relaxed, as CUDA's atomicXxx; the _block and _system forms narrow or widen the
 * scope to the block or the whole system */
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
__R3_DEVICE unsigned short atomicCAS(unsigned short *address, unsigned short compare,
                                     unsigned short value) {
  __atomic_compare_exchange_n(address, &compare, value, false, __ATOMIC_RELAXED,
                              __ATOMIC_RELAXED);
  return compare; }
/* ((old >= limit) ? 0 : old + 1) and ((old == 0 || old > limit) ? limit : old - 1) */
__R3_DEVICE unsigned int atomicInc(unsigned int *address, unsigned int limit) {
  return __nvvm_atom_inc_gen_ui(address, limit); }
__R3_DEVICE unsigned int atomicDec(unsigned int *address, unsigned int limit) {
  return __nvvm_atom_dec_gen_ui(address, limit); }
#define __R3_SCOPED(suffix, scope)                                                         \
  __R3_DEVICE int atomicAdd##suffix(int *a, int v) {                                       \
    return __nvvm_atom##scope##_add_gen_i(a, v); }                                         \
  __R3_DEVICE unsigned int atomicAdd##suffix(unsigned int *a, unsigned int v) {            \
    return (unsigned int)__nvvm_atom##scope##_add_gen_i((int *)a, (int)v); }               \
  __R3_DEVICE unsigned long long atomicAdd##suffix(unsigned long long *a,                  \
                                                   unsigned long long v) {                 \
    return (unsigned long long)__nvvm_atom##scope##_add_gen_ll((long long *)a,             \
                                                                (long long)v); }           \
  __R3_DEVICE float atomicAdd##suffix(float *a, float v) {                                 \
    return __nvvm_atom##scope##_add_gen_f(a, v); }                                         \
  __R3_DEVICE double atomicAdd##suffix(double *a, double v) {                              \
    return __nvvm_atom##scope##_add_gen_d(a, v); }                                         \
  __R3_DEVICE int atomicSub##suffix(int *a, int v) {                                       \
    return __nvvm_atom##scope##_add_gen_i(a, -v); }                                        \
  __R3_DEVICE unsigned int atomicSub##suffix(unsigned int *a, unsigned int v) {            \
    return (unsigned int)__nvvm_atom##scope##_add_gen_i((int *)a, -(int)v); }              \
  __R3_DEVICE int atomicExch##suffix(int *a, int v) {                                      \
    return __nvvm_atom##scope##_xchg_gen_i(a, v); }                                        \
  __R3_DEVICE unsigned int atomicExch##suffix(unsigned int *a, unsigned int v) {           \
    return (unsigned int)__nvvm_atom##scope##_xchg_gen_i((int *)a, (int)v); }              \
  __R3_DEVICE int atomicMax##suffix(int *a, int v) {                                       \
    return __nvvm_atom##scope##_max_gen_i(a, v); }                                         \
  __R3_DEVICE unsigned int atomicMax##suffix(unsigned int *a, unsigned int v) {            \
    return __nvvm_atom##scope##_max_gen_ui(a, v); }                                        \
  __R3_DEVICE int atomicMin##suffix(int *a, int v) {                                       \
    return __nvvm_atom##scope##_min_gen_i(a, v); }                                         \
  __R3_DEVICE unsigned int atomicMin##suffix(unsigned int *a, unsigned int v) {            \
    return __nvvm_atom##scope##_min_gen_ui(a, v); }                                        \
  __R3_DEVICE unsigned int atomicInc##suffix(unsigned int *a, unsigned int v) {            \
    return __nvvm_atom##scope##_inc_gen_ui(a, v); }                                        \
  __R3_DEVICE unsigned int atomicDec##suffix(unsigned int *a, unsigned int v) {            \
    return __nvvm_atom##scope##_dec_gen_ui(a, v); }                                        \
  __R3_DEVICE int atomicCAS##suffix(int *a, int c, int v) {                                \
    return __nvvm_atom##scope##_cas_gen_i(a, c, v); }                                      \
  __R3_DEVICE unsigned int atomicCAS##suffix(unsigned int *a, unsigned int c,              \
                                             unsigned int v) {                             \
    return (unsigned int)__nvvm_atom##scope##_cas_gen_i((int *)a, (int)c, (int)v); }       \
  __R3_DEVICE unsigned long long atomicCAS##suffix(unsigned long long *a,                  \
                                                   unsigned long long c,                   \
                                                   unsigned long long v) {                 \
    return (unsigned long long)__nvvm_atom##scope##_cas_gen_ll(                            \
        (long long *)a, (long long)c, (long long)v); }                                     \
  __R3_DEVICE int atomicAnd##suffix(int *a, int v) {                                       \
    return __nvvm_atom##scope##_and_gen_i(a, v); }                                         \
  __R3_DEVICE unsigned int atomicAnd##suffix(unsigned int *a, unsigned int v) {            \
    return (unsigned int)__nvvm_atom##scope##_and_gen_i((int *)a, (int)v); }               \
  __R3_DEVICE int atomicOr##suffix(int *a, int v) {                                        \
    return __nvvm_atom##scope##_or_gen_i(a, v); }                                          \
  __R3_DEVICE unsigned int atomicOr##suffix(unsigned int *a, unsigned int v) {             \
    return (unsigned int)__nvvm_atom##scope##_or_gen_i((int *)a, (int)v); }                \
  __R3_DEVICE int atomicXor##suffix(int *a, int v) {                                       \
    return __nvvm_atom##scope##_xor_gen_i(a, v); }                                         \
  __R3_DEVICE unsigned int atomicXor##suffix(unsigned int *a, unsigned int v) {            \
    return (unsigned int)__nvvm_atom##scope##_xor_gen_i((int *)a, (int)v); }
__R3_SCOPED(_block, _cta)
__R3_SCOPED(_system, _sys)
#undef __R3_SCOPED
#undef __R3_ATOMIC
#undef __R3_ATOMICS
#undef __R3_BIT_ATOMICS

/* loads through the read-only data cache (ld.global.nc), as nvcc's __ldg, with or without
 * __restrict__; other types fall back to a plain load */
#define __R3_LDG(type, builtin)                                                            \
  __R3_DEVICE type __ldg(const type *p) { return builtin(p); }
__R3_LDG(char, __nvvm_ldg_c) __R3_LDG(signed char, __nvvm_ldg_sc)
__R3_LDG(unsigned char, __nvvm_ldg_uc) __R3_LDG(short, __nvvm_ldg_s)
__R3_LDG(unsigned short, __nvvm_ldg_us) __R3_LDG(int, __nvvm_ldg_i)
__R3_LDG(unsigned int, __nvvm_ldg_ui) __R3_LDG(long, __nvvm_ldg_l)
__R3_LDG(unsigned long, __nvvm_ldg_ul) __R3_LDG(long long, __nvvm_ldg_ll)
__R3_LDG(unsigned long long, __nvvm_ldg_ull) __R3_LDG(float, __nvvm_ldg_f)
__R3_LDG(double, __nvvm_ldg_d)
#undef __R3_LDG
/* vectors: one read-only load per lane, the first carrying the vector's alignment, which
 * LLVM merges into one ld.global.nc.v2/v4 (a vector load would be split, and lose its
 * read-only marking, when the value goes through memory) */
#define __R3_LDG_VEC(vector, element, builtin, align, ...)                                 \
  __R3_DEVICE vector __ldg(const vector *p) {                                              \
    typedef element __first __attribute__((aligned(align)));                              \
    vector v;                                                                              \
    v.x = builtin((const __first *)&p->x);                                                 \
    __VA_ARGS__                                                                            \
    return v; }
#define __R3_LDG_VECS(name, element, builtin, a2, a4)                                      \
  __R3_LDG_VEC(name##2, element, builtin, a2, v.y = builtin(&p->y);)                       \
  __R3_LDG_VEC(name##4, element, builtin, a4, v.y = builtin(&p->y);                        \
               v.z = builtin(&p->z); v.w = builtin(&p->w);)
__R3_LDG_VECS(char, signed char, __nvvm_ldg_sc, 2, 4)
__R3_LDG_VECS(uchar, unsigned char, __nvvm_ldg_uc, 2, 4)
__R3_LDG_VECS(short, short, __nvvm_ldg_s, 4, 8)
__R3_LDG_VECS(ushort, unsigned short, __nvvm_ldg_us, 4, 8)
__R3_LDG_VECS(int, int, __nvvm_ldg_i, 8, 16)
__R3_LDG_VECS(uint, unsigned int, __nvvm_ldg_ui, 8, 16)
__R3_LDG_VECS(longlong, long long, __nvvm_ldg_ll, 16, 16)
__R3_LDG_VECS(ulonglong, unsigned long long, __nvvm_ldg_ull, 16, 16)
__R3_LDG_VECS(float, float, __nvvm_ldg_f, 8, 16)
__R3_LDG_VECS(double, double, __nvvm_ldg_d, 16, 16)
#undef __R3_LDG_VECS
#undef __R3_LDG_VEC
/* memory and strings: device-side copies through LLVM's own intrinsics */
__R3_DEVICE void *memcpy(void *to, const void *from, __r3_size_t n) {
  return __builtin_memcpy(to, from, n); }
__R3_DEVICE void *memset(void *to, int value, __r3_size_t n) {
  return __builtin_memset(to, value, n); }

/* printf: clang lowers it to CUDA's vprintf; assert is in <assert.h>/<cassert> */
extern "C" __device__ int printf(const char *format, ...);
extern "C" __device__ void __assertfail(const char *message, const char *file,
                                        unsigned int line, const char *function,
                                        __r3_size_t char_size);
/* what assert() calls: __assertfail on the device; host code beside the kernels (a
   project's utilities) asserts too, and is parsed but never built here */
static __host__ __device__ __forceinline__ void __r3_assert_fail(
    const char *message, const char *file, unsigned int line, const char *function) {
#ifdef __CUDA_ARCH__
  __assertfail(message, file, line, function, 1);
#endif
}
__R3_DEVICE void __trap() { __builtin_trap(); }
__R3_DEVICE void __brkpt() { __builtin_debugtrap(); }

/* clocks and sleeping */
__R3_DEVICE long long clock64() { return (long long)__nvvm_read_ptx_sreg_clock64(); }
__R3_DEVICE long clock() { return (long)__nvvm_read_ptx_sreg_clock(); }
#if __CUDA_ARCH__ >= 700
__R3_DEVICE void __nanosleep(unsigned int ns) { __nvvm_nanosleep(ns); }
#endif

/* address spaces: generic pointers to and from a space's own addresses (cvta), and tests */
#define __R3_CVTA(space, number)                                                           \
  __R3_DEVICE size_t __cvta_generic_to_##space(const void *p) {                            \
    return (size_t)(__attribute__((address_space(number))) const char *)p; }               \
  __R3_DEVICE void *__cvta_##space##_to_generic(size_t a) {                                \
    return (void *)(__attribute__((address_space(number))) char *)a; }
__R3_CVTA(global, 1)
__R3_CVTA(shared, 3)
__R3_CVTA(constant, 4)
__R3_CVTA(local, 5)
#undef __R3_CVTA
__R3_DEVICE unsigned int __isGlobal(const void *p) { return __nvvm_isspacep_global(p); }
__R3_DEVICE unsigned int __isShared(const void *p) { return __nvvm_isspacep_shared(p); }
__R3_DEVICE unsigned int __isConstant(const void *p) { return __nvvm_isspacep_const(p); }
__R3_DEVICE unsigned int __isLocal(const void *p) { return __nvvm_isspacep_local(p); }

/* integer and bit intrinsics with an NVPTX instruction of their own (prmt, mul24, mul.hi);
 * the others are plain C++, in r3_common.h */
__R3_DEVICE unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
  return (unsigned int)__nvvm_prmt((int)x, (int)y, (int)s); }
__R3_DEVICE int __mul24(int a, int b) { return __nvvm_mul24_i(a, b); }
__R3_DEVICE unsigned int __umul24(unsigned int a, unsigned int b) {
  return __nvvm_mul24_ui(a, b); }
__R3_DEVICE int __mulhi(int a, int b) { return __nvvm_mulhi_i(a, b); }
__R3_DEVICE unsigned int __umulhi(unsigned int a, unsigned int b) {
  return __nvvm_mulhi_ui(a, b); }
__R3_DEVICE long long __mul64hi(long long a, long long b) { return __nvvm_mulhi_ll(a, b); }
__R3_DEVICE unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return __nvvm_mulhi_ull(a, b); }

/* min, max, abs: CUDA's overloads beyond r3_device.h's (a float with a double, longs) */
__R3_DEVICE double min(float a, double b) { return __builtin_fmin(a, b); }
__R3_DEVICE double max(float a, double b) { return __builtin_fmax(a, b); }
__R3_DEVICE double min(double a, float b) { return __builtin_fmin(a, b); }
__R3_DEVICE double max(double a, float b) { return __builtin_fmax(a, b); }
__R3_DEVICE long labs(long x) { return x < 0 ? -x : x; }
__R3_DEVICE long long llabs(long long x) { return x < 0 ? -x : x; }
__R3_DEVICE long long abs(long long x) { return x < 0 ? -x : x; }
__R3_DEVICE long abs(long x) { return x < 0 ? -x : x; }
__R3_DEVICE long long llmin(long long a, long long b) { return a < b ? a : b; }
__R3_DEVICE long long llmax(long long a, long long b) { return a > b ? a : b; }
__R3_DEVICE unsigned int umin(unsigned int a, unsigned int b) { return a < b ? a : b; }
__R3_DEVICE unsigned int umax(unsigned int a, unsigned int b) { return a > b ? a : b; }
__R3_DEVICE unsigned long long ullmin(unsigned long long a, unsigned long long b) {
  return a < b ? a : b; }
__R3_DEVICE unsigned long long ullmax(unsigned long long a, unsigned long long b) {
  return a > b ? a : b; }

/* float arithmetic and conversions in a named rounding mode: _rn nearest, _rz towards zero,
 * _ru up, _rd down (PTX's rp and rm) */
#define __R3_ROUNDED(macro, ...)                                                           \
  macro(_rn, rn, __VA_ARGS__) macro(_rz, rz, __VA_ARGS__)                                  \
  macro(_ru, rp, __VA_ARGS__) macro(_rd, rm, __VA_ARGS__)
#define __R3_BINARY(mode, nv, name, op, type, suffix)                                      \
  __R3_DEVICE type name##mode(type a, type b) { return __nvvm_##op##_##nv##_##suffix(a, b); }
#define __R3_UNARY(mode, nv, name, op, type, suffix)                                       \
  __R3_DEVICE type name##mode(type a) { return __nvvm_##op##_##nv##_##suffix(a); }
#define __R3_TERNARY(mode, nv, name, op, type, suffix)                                     \
  __R3_DEVICE type name##mode(type a, type b, type c) {                                    \
    return __nvvm_##op##_##nv##_##suffix(a, b, c); }
#define __R3_SUB(mode, nv, name, op, type, suffix)                                         \
  __R3_DEVICE type name##mode(type a, type b) { return __nvvm_##op##_##nv##_##suffix(a, -b); }
#define __R3_CONVERT(mode, nv, name, op, result, argument)                                 \
  __R3_DEVICE result name##mode(argument a) { return __nvvm_##op##_##nv(a); }
__R3_ROUNDED(__R3_BINARY, __fadd, add, float, f)
__R3_ROUNDED(__R3_SUB, __fsub, add, float, f)
__R3_ROUNDED(__R3_BINARY, __fmul, mul, float, f)
__R3_ROUNDED(__R3_BINARY, __fdiv, div, float, f)
__R3_ROUNDED(__R3_UNARY, __frcp, rcp, float, f)
__R3_ROUNDED(__R3_UNARY, __fsqrt, sqrt, float, f)
__R3_ROUNDED(__R3_TERNARY, __fmaf, fma, float, f)
__R3_ROUNDED(__R3_BINARY, __dadd, add, double, d)
__R3_ROUNDED(__R3_SUB, __dsub, add, double, d)
__R3_ROUNDED(__R3_BINARY, __dmul, mul, double, d)
__R3_ROUNDED(__R3_BINARY, __ddiv, div, double, d)
__R3_ROUNDED(__R3_UNARY, __drcp, rcp, double, d)
__R3_ROUNDED(__R3_UNARY, __dsqrt, sqrt, double, d)
__R3_ROUNDED(__R3_TERNARY, __fma, fma, double, d)
__R3_ROUNDED(__R3_CONVERT, __float2int, f2i, int, float)
__R3_ROUNDED(__R3_CONVERT, __float2uint, f2ui, unsigned int, float)
__R3_ROUNDED(__R3_CONVERT, __float2ll, f2ll, long long, float)
__R3_ROUNDED(__R3_CONVERT, __float2ull, f2ull, unsigned long long, float)
__R3_ROUNDED(__R3_CONVERT, __double2int, d2i, int, double)
__R3_ROUNDED(__R3_CONVERT, __double2uint, d2ui, unsigned int, double)
__R3_ROUNDED(__R3_CONVERT, __double2ll, d2ll, long long, double)
__R3_ROUNDED(__R3_CONVERT, __double2ull, d2ull, unsigned long long, double)
__R3_ROUNDED(__R3_CONVERT, __double2float, d2f, float, double)
__R3_ROUNDED(__R3_CONVERT, __int2float, i2f, float, int)
__R3_ROUNDED(__R3_CONVERT, __uint2float, ui2f, float, unsigned int)
__R3_ROUNDED(__R3_CONVERT, __ll2float, ll2f, float, long long)
__R3_ROUNDED(__R3_CONVERT, __ull2float, ull2f, float, unsigned long long)
__R3_ROUNDED(__R3_CONVERT, __ll2double, ll2d, double, long long)
__R3_ROUNDED(__R3_CONVERT, __ull2double, ull2d, double, unsigned long long)
#undef __R3_ROUNDED
#undef __R3_BINARY
#undef __R3_UNARY
#undef __R3_TERNARY
#undef __R3_SUB
#undef __R3_CONVERT
__R3_DEVICE double __int2double_rn(int a) { return (double)a; }
__R3_DEVICE double __uint2double_rn(unsigned int a) { return (double)a; }
__R3_DEVICE float __fdividef(float a, float b) { return __nvvm_div_approx_f(a, b); }
__R3_DEVICE float fdividef(float a, float b) { return __nvvm_div_approx_f(a, b); }
__R3_DEVICE float __saturatef(float x) { return __nvvm_saturate_f(x); }

/* math: fabs, floor... fmin, fmax, copysign, fma, ldexp and isnan... are in r3_device.h */
__R3_DEVICE float sqrtf(float x) { return __nvvm_sqrt_rn_f(x); }
__R3_DEVICE double sqrt(double x) { return __nvvm_sqrt_rn_d(x); }
/* rsqrtf is the hardware's approximation, as in CUDA (rsqrt.approx.f32) */
__R3_DEVICE float rsqrtf(float x) { return __nvvm_rsqrt_approx_f(x); }
__R3_DEVICE float fdimf(float a, float b) { return a <= b ? 0.0f : a - b; }  /* NaN stays */
__R3_DEVICE double fdim(double a, double b) { return a <= b ? 0.0 : a - b; }
__R3_DEVICE long lrintf(float x) { return (long)__builtin_rintf(x); }
__R3_DEVICE long long llrintf(float x) { return (long long)__builtin_rintf(x); }
__R3_DEVICE long lroundf(float x) { return (long)__builtin_roundf(x); }
__R3_DEVICE long long llroundf(float x) { return (long long)__builtin_roundf(x); }
__R3_DEVICE int __isnanf(float x) { return __builtin_isnan(x); }
__R3_DEVICE int __isinff(float x) { return __builtin_isinf(x); }
__R3_DEVICE int __finitef(float x) { return __builtin_isfinite(x); }
__R3_DEVICE int __isnan(double x) { return __builtin_isnan(x); }
__R3_DEVICE int __isinf(double x) { return __builtin_isinf(x); }
__R3_DEVICE int __finite(double x) { return __builtin_isfinite(x); }
__R3_DEVICE float nanf(const char *) { return __builtin_nanf(""); }
__R3_DEVICE double nan(const char *) { return __builtin_nan(""); }
__R3_DEVICE float scalbnf(float x, int e) { return __builtin_ldexpf(x, e); }
__R3_DEVICE double scalbn(double x, int e) { return __builtin_ldexp(x, e); }
/* CUDA's C++ overloads of float arguments (nvcc's headers have them without an include) */
__R3_DEVICE float sqrt(float x) { return sqrtf(x); }
__R3_DEVICE float fdim(float a, float b) { return fdimf(a, b); }
__R3_DEVICE float ldexp(float x, int e) { return __builtin_ldexpf(x, e); }
__R3_DEVICE float scalbn(float x, int e) { return __builtin_ldexpf(x, e); }

/* the fast intrinsics: the hardware's approximations, everywhere */
#define __R3_LOG2E 1.4426950408889634f
#define __R3_LN2 0.6931471805599453f
#define __R3_LOG10_2 0.3010299956639812f
#define __R3_LOG2_10 3.3219280948873622f
__R3_DEVICE float __expf(float x) { return __nvvm_ex2_approx_f(x * __R3_LOG2E); }
__R3_DEVICE float __exp10f(float x) { return __nvvm_ex2_approx_f(x * __R3_LOG2_10); }
__R3_DEVICE float __logf(float x) { return __nvvm_lg2_approx_f(x) * __R3_LN2; }
__R3_DEVICE float __log2f(float x) { return __nvvm_lg2_approx_f(x); }
__R3_DEVICE float __log10f(float x) { return __nvvm_lg2_approx_f(x) * __R3_LOG10_2; }
__R3_DEVICE float __sinf(float x) { return __nvvm_sin_approx_f(x); }
__R3_DEVICE float __cosf(float x) { return __nvvm_cos_approx_f(x); }
__R3_DEVICE float __tanf(float x) {
  return __nvvm_sin_approx_f(x) * __nvvm_rcp_approx_ftz_f(__nvvm_cos_approx_f(x)); }
__R3_DEVICE void __sincosf(float x, float *s, float *c) {
  *s = __nvvm_sin_approx_f(x); *c = __nvvm_cos_approx_f(x); }
__R3_DEVICE float __powf(float x, float y) {
  return __nvvm_ex2_approx_f(y * __nvvm_lg2_approx_f(x)); }

/* the other math functions: CUDA's libdevice where installed (R3_LIBDEVICE), the ones nvcc
 * calls; without it, the float versions of the common ones are the fast approximations */
#ifdef R3_LIBDEVICE
#define __R3_LIBDEVICE_1(name)                                                             \
  extern "C" __device__ float __nv_##name##f(float);                                       \
  extern "C" __device__ double __nv_##name(double);                                        \
  __R3_DEVICE float name##f(float x) { return __nv_##name##f(x); }                         \
  __R3_DEVICE float name(float x) { return __nv_##name##f(x); }                            \
  __R3_DEVICE double name(double x) { return __nv_##name(x); }
#define __R3_LIBDEVICE_2(name)                                                             \
  extern "C" __device__ float __nv_##name##f(float, float);                                \
  extern "C" __device__ double __nv_##name(double, double);                                \
  __R3_DEVICE float name##f(float x, float y) { return __nv_##name##f(x, y); }             \
  __R3_DEVICE float name(float x, float y) { return __nv_##name##f(x, y); }                \
  __R3_DEVICE double name(double x, double y) { return __nv_##name(x, y); }
__R3_LIBDEVICE_1(exp) __R3_LIBDEVICE_1(exp2) __R3_LIBDEVICE_1(exp10)
__R3_LIBDEVICE_1(expm1) __R3_LIBDEVICE_1(log) __R3_LIBDEVICE_1(log2)
__R3_LIBDEVICE_1(log10) __R3_LIBDEVICE_1(log1p) __R3_LIBDEVICE_1(logb)
__R3_LIBDEVICE_1(sin) __R3_LIBDEVICE_1(cos) __R3_LIBDEVICE_1(tan)
__R3_LIBDEVICE_1(sinpi) __R3_LIBDEVICE_1(cospi)
__R3_LIBDEVICE_1(asin) __R3_LIBDEVICE_1(acos) __R3_LIBDEVICE_1(atan)
__R3_LIBDEVICE_1(sinh) __R3_LIBDEVICE_1(cosh) __R3_LIBDEVICE_1(tanh)
__R3_LIBDEVICE_1(asinh) __R3_LIBDEVICE_1(acosh) __R3_LIBDEVICE_1(atanh)
__R3_LIBDEVICE_1(erf) __R3_LIBDEVICE_1(erfc) __R3_LIBDEVICE_1(erfinv)
__R3_LIBDEVICE_1(erfcinv) __R3_LIBDEVICE_1(normcdf) __R3_LIBDEVICE_1(normcdfinv)
__R3_LIBDEVICE_1(lgamma) __R3_LIBDEVICE_1(tgamma)
__R3_LIBDEVICE_1(cbrt) __R3_LIBDEVICE_1(rcbrt)
__R3_LIBDEVICE_2(pow) __R3_LIBDEVICE_2(atan2) __R3_LIBDEVICE_2(fmod)
__R3_LIBDEVICE_2(remainder) __R3_LIBDEVICE_2(hypot) __R3_LIBDEVICE_2(nextafter)
#undef __R3_LIBDEVICE_1
#undef __R3_LIBDEVICE_2
extern "C" __device__ void __nv_sincosf(float, float *, float *);
extern "C" __device__ void __nv_sincos(double, double *, double *);
extern "C" __device__ float __nv_frexpf(float, int *);
extern "C" __device__ double __nv_frexp(double, int *);
extern "C" __device__ float __nv_modff(float, float *);
extern "C" __device__ double __nv_modf(double, double *);
extern "C" __device__ int __nv_ilogbf(float);
extern "C" __device__ int __nv_ilogb(double);
extern "C" __device__ double __nv_rsqrt(double);
extern "C" __device__ float __nv_frsqrt_rn(float);
__R3_DEVICE double rsqrt(double x) { return __nv_rsqrt(x); }
__R3_DEVICE float __frsqrt_rn(float x) { return __nv_frsqrt_rn(x); }
__R3_DEVICE void sincosf(float x, float *s, float *c) { __nv_sincosf(x, s, c); }
__R3_DEVICE void sincos(double x, double *s, double *c) { __nv_sincos(x, s, c); }
__R3_DEVICE float frexpf(float x, int *e) { return __nv_frexpf(x, e); }
__R3_DEVICE double frexp(double x, int *e) { return __nv_frexp(x, e); }
__R3_DEVICE float modff(float x, float *i) { return __nv_modff(x, i); }
__R3_DEVICE double modf(double x, double *i) { return __nv_modf(x, i); }
__R3_DEVICE int ilogbf(float x) { return __nv_ilogbf(x); }
__R3_DEVICE int ilogb(double x) { return __nv_ilogb(x); }
__R3_DEVICE void sincos(float x, float *s, float *c) { __nv_sincosf(x, s, c); }
__R3_DEVICE float frexp(float x, int *e) { return __nv_frexpf(x, e); }
__R3_DEVICE float modf(float x, float *i) { return __nv_modff(x, i); }
__R3_DEVICE int ilogb(float x) { return __nv_ilogbf(x); }
#else
__R3_DEVICE float exp2f(float x) { return __nvvm_ex2_approx_f(x); }
__R3_DEVICE float expf(float x) { return __expf(x); }
__R3_DEVICE float exp10f(float x) { return __exp10f(x); }
__R3_DEVICE float log2f(float x) { return __log2f(x); }
__R3_DEVICE float logf(float x) { return __logf(x); }
__R3_DEVICE float log10f(float x) { return __log10f(x); }
__R3_DEVICE float sinf(float x) { return __sinf(x); }
__R3_DEVICE float cosf(float x) { return __cosf(x); }
__R3_DEVICE float tanf(float x) { return __tanf(x); }
__R3_DEVICE void sincosf(float x, float *s, float *c) { __sincosf(x, s, c); }
__R3_DEVICE float __frsqrt_rn(float x) { return 1.0f / __nvvm_sqrt_rn_f(x); }  /* ~1 ulp */
__R3_DEVICE double rsqrt(double x) { return 1.0 / __nvvm_sqrt_rn_d(x); }
__R3_DEVICE float powf(float x, float y) { return __powf(x, y); }
__R3_DEVICE float tanhf(float x) {
  float e = __nvvm_ex2_approx_f(-2.0f * __builtin_fabsf(x) * __R3_LOG2E);
  return __builtin_copysignf((1.0f - e) / (1.0f + e), x); }
#define __R3_FLOAT_NAME(name) __R3_DEVICE float name(float x) { return name##f(x); }
__R3_FLOAT_NAME(exp2) __R3_FLOAT_NAME(exp) __R3_FLOAT_NAME(exp10) __R3_FLOAT_NAME(log2)
__R3_FLOAT_NAME(log) __R3_FLOAT_NAME(log10) __R3_FLOAT_NAME(sin) __R3_FLOAT_NAME(cos)
__R3_FLOAT_NAME(tan) __R3_FLOAT_NAME(tanh)
#undef __R3_FLOAT_NAME
__R3_DEVICE float pow(float x, float y) { return powf(x, y); }
__R3_DEVICE void sincos(float x, float *s, float *c) { sincosf(x, s, c); }
#define __R3_NEEDS_LIBDEVICE(type, name, ...)                                              \
  __attribute__((unavailable(#name " needs CUDA's libdevice (libdevice.10.bc); "          \
                 "install the CUDA toolkit or set PYTEST_R3_LIBDEVICE to the file")))      \
  __device__ type name(__VA_ARGS__);
#define __R3_NEEDS_LIBDEVICE_1(name)                                                       \
  __R3_NEEDS_LIBDEVICE(float, name##f, float) __R3_NEEDS_LIBDEVICE(float, name, float)     \
  __R3_NEEDS_LIBDEVICE(double, name, double)
#define __R3_NEEDS_LIBDEVICE_2(name)                                                       \
  __R3_NEEDS_LIBDEVICE(float, name##f, float, float)                                       \
  __R3_NEEDS_LIBDEVICE(float, name, float, float)                                          \
  __R3_NEEDS_LIBDEVICE(double, name, double, double)
__R3_NEEDS_LIBDEVICE(double, exp, double) __R3_NEEDS_LIBDEVICE(double, exp2, double)
__R3_NEEDS_LIBDEVICE(double, exp10, double) __R3_NEEDS_LIBDEVICE(double, log, double)
__R3_NEEDS_LIBDEVICE(double, log2, double) __R3_NEEDS_LIBDEVICE(double, log10, double)
__R3_NEEDS_LIBDEVICE(double, sin, double) __R3_NEEDS_LIBDEVICE(double, cos, double)
__R3_NEEDS_LIBDEVICE(double, tan, double) __R3_NEEDS_LIBDEVICE(double, tanh, double)
__R3_NEEDS_LIBDEVICE(double, pow, double, double)
__R3_NEEDS_LIBDEVICE(void, sincos, double, double *, double *)
__R3_NEEDS_LIBDEVICE_1(expm1) __R3_NEEDS_LIBDEVICE_1(log1p) __R3_NEEDS_LIBDEVICE_1(logb)
__R3_NEEDS_LIBDEVICE_1(sinpi) __R3_NEEDS_LIBDEVICE_1(cospi)
__R3_NEEDS_LIBDEVICE_1(asin) __R3_NEEDS_LIBDEVICE_1(acos) __R3_NEEDS_LIBDEVICE_1(atan)
__R3_NEEDS_LIBDEVICE_1(sinh) __R3_NEEDS_LIBDEVICE_1(cosh)
__R3_NEEDS_LIBDEVICE_1(asinh) __R3_NEEDS_LIBDEVICE_1(acosh) __R3_NEEDS_LIBDEVICE_1(atanh)
__R3_NEEDS_LIBDEVICE_1(erf) __R3_NEEDS_LIBDEVICE_1(erfc) __R3_NEEDS_LIBDEVICE_1(erfinv)
__R3_NEEDS_LIBDEVICE_1(erfcinv) __R3_NEEDS_LIBDEVICE_1(normcdf)
__R3_NEEDS_LIBDEVICE_1(normcdfinv) __R3_NEEDS_LIBDEVICE_1(lgamma)
__R3_NEEDS_LIBDEVICE_1(tgamma) __R3_NEEDS_LIBDEVICE_1(cbrt) __R3_NEEDS_LIBDEVICE_1(rcbrt)
__R3_NEEDS_LIBDEVICE_2(atan2) __R3_NEEDS_LIBDEVICE_2(fmod) __R3_NEEDS_LIBDEVICE_2(remainder)
__R3_NEEDS_LIBDEVICE_2(hypot) __R3_NEEDS_LIBDEVICE_2(nextafter)
__R3_NEEDS_LIBDEVICE(float, frexpf, float, int *) __R3_NEEDS_LIBDEVICE(double, frexp, double, int *)
__R3_NEEDS_LIBDEVICE(float, modff, float, float *) __R3_NEEDS_LIBDEVICE(double, modf, double, double *)
__R3_NEEDS_LIBDEVICE(int, ilogbf, float) __R3_NEEDS_LIBDEVICE(int, ilogb, double)
#undef __R3_NEEDS_LIBDEVICE
#undef __R3_NEEDS_LIBDEVICE_1
#undef __R3_NEEDS_LIBDEVICE_2
#endif

#undef __R3_DEVICE
#endif /* clang CUDA without CUDA's headers */
#endif /* R3_CUDA_H */
