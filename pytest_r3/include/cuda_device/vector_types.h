/* CUDA's built-in vector types (float4, int2, uchar4...) with their make_* helpers, for
 * pytest-r3's clang build; r3_cuda.h includes it, so kernels need no #include. Sizes and
 * alignments are CUDA's: a float4 is 16-byte aligned, so float4 loads and stores become
 * single 128-bit accesses. Under nvcc, CUDA's own vector_types.h is used instead.
 */
#ifndef R3_VECTOR_TYPES_H
#define R3_VECTOR_TYPES_H
#ifdef R3_CUDA_CLANG /* pytest-r3's clang build (r3_cuda.h), not nvcc */

#define __R3_VEC_DEVICE static __host__ __device__ __inline__

#define __R3_VEC1(name, type, align)                                                       \
  struct __attribute__((aligned(align))) name { type x; };                                 \
  __R3_VEC_DEVICE name make_##name(type x) { name v; v.x = x; return v; }
#define __R3_VEC2(name, type, align)                                                       \
  struct __attribute__((aligned(align))) name { type x, y; };                              \
  __R3_VEC_DEVICE name make_##name(type x, type y) { name v; v.x = x; v.y = y; return v; }
#define __R3_VEC3(name, type, align)                                                       \
  struct __attribute__((aligned(align))) name { type x, y, z; };                           \
  __R3_VEC_DEVICE name make_##name(type x, type y, type z) {                               \
    name v; v.x = x; v.y = y; v.z = z; return v; }
#define __R3_VEC4(name, type, align)                                                       \
  struct __attribute__((aligned(align))) name { type x, y, z, w; };                        \
  __R3_VEC_DEVICE name make_##name(type x, type y, type z, type w) {                       \
    name v; v.x = x; v.y = y; v.z = z; v.w = w; return v; }
/* name, element type, alignment of the 1-, 2-, 3- and 4-element types (CUDA's) */
#define __R3_VECS(name, type, a1, a2, a3, a4)                                              \
  __R3_VEC1(name##1, type, a1) __R3_VEC2(name##2, type, a2)                                \
  __R3_VEC3(name##3, type, a3) __R3_VEC4(name##4, type, a4)
__R3_VECS(char, signed char, 1, 2, 1, 4)
__R3_VECS(uchar, unsigned char, 1, 2, 1, 4)
__R3_VECS(short, short, 2, 4, 2, 8)
__R3_VECS(ushort, unsigned short, 2, 4, 2, 8)
__R3_VECS(int, int, 4, 8, 4, 16)
__R3_VECS(uint, unsigned int, 4, 8, 4, 16)
__R3_VECS(long, long, 8, 16, 8, 16)
__R3_VECS(ulong, unsigned long, 8, 16, 8, 16)
__R3_VECS(longlong, long long, 8, 16, 8, 16)
__R3_VECS(ulonglong, unsigned long long, 8, 16, 8, 16)
__R3_VECS(float, float, 4, 8, 4, 16)
__R3_VECS(double, double, 8, 16, 8, 16)
/* CUDA 13's 4-element 64-bit types with 16- and 32-byte alignment (long4_16a, double4_32a...) */
#define __R3_VEC4_ALIGNED(name, type)                                                      \
  __R3_VEC4(name##4_16a, type, 16) __R3_VEC4(name##4_32a, type, 32)
__R3_VEC4_ALIGNED(long, long)
__R3_VEC4_ALIGNED(ulong, unsigned long)
__R3_VEC4_ALIGNED(longlong, long long)
__R3_VEC4_ALIGNED(ulonglong, unsigned long long)
__R3_VEC4_ALIGNED(double, double)
#undef __R3_VEC4_ALIGNED
#undef __R3_VECS
#undef __R3_VEC1
#undef __R3_VEC2
#undef __R3_VEC3
#undef __R3_VEC4
#undef __R3_VEC_DEVICE

/* dim3: a uint3 whose missing dimensions are 1 */
struct dim3 {
  unsigned int x, y, z;
  __host__ __device__ constexpr dim3(unsigned int vx = 1, unsigned int vy = 1,
                                     unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  __host__ __device__ constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  __host__ __device__ constexpr operator uint3() const { return uint3{x, y, z}; }
};

#endif
#endif /* R3_VECTOR_TYPES_H */
