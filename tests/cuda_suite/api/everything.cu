// Not a realistic kernel: one call of every function docs/cuda.md lists as supported, so
// that each compiles, links (libdevice) and assembles. Compile-only; never launched.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math_constants.h>
struct Params { float scale; int n; };
__managed__ int managed_counter;
__device__ float g_table[4];
__global__ void __launch_bounds__(256) everything(float *f, double *d, int *i, unsigned *u,
    long long *ll, unsigned long long *ull, __half *h, __half2 *h2, float4 *f4, uchar4 *c4,
    unsigned short *us) {
  // vectors
  long4 l4 = make_long4(1, 2, 3, 4); ulong2 ul2 = make_ulong2(1, 2); double3 d3 = make_double3(1, 2, 3);
  short2 s2 = __ldg((const short2 *)us); char4 ch4 = __ldg((const char4 *)c4); int3 i3 = make_int3(i[0], i[1], i[2]);
  double2 dd2 = __ldg((const double2 *)d); longlong2 lq = __ldg((const longlong2 *)ll);
  f[0] = l4.w + ul2.y + d3.z + s2.y + ch4.w + i3.z + dd2.y + lq.y + __ldg(f4).w;
  // warp
  i[0] = __uni_sync(~0u, 1) + __match_any_sync(~0u, i[1]) + __match_any_sync(~0u, ll[0]);
  i[1] = __reduce_add_sync(~0u, i[2]) + __reduce_min_sync(~0u, u[0]) + __reduce_max_sync(~0u, i[3])
       + __reduce_and_sync(~0u, u[1]) + __reduce_or_sync(~0u, u[2]) + __reduce_xor_sync(~0u, u[3]);
  d[0] = __shfl_sync(~0u, d[1], 3) + __shfl_up_sync(~0u, ll[1], 1, 16) + __shfl_down_sync(~0u, ull[0], 2);
  // atomics
  atomicAdd_system(f + 1, 1.f); atomicAdd_block(d + 2, 1.0); atomicCAS_block(ull + 1, 1ull, 2ull);
  atomicExch_system(i + 4, 3); atomicMax_block(u + 5, 3u); atomicMin_system(i + 5, 2);
  atomicDec(u + 6, 9u); atomicDec_block(u + 7, 4u); atomicInc_system(u + 8, 4u);
  atomicAnd_block(i + 6, 1); atomicOr_system(u + 9, 2u); atomicXor_block(i + 7, 3);
  atomicSub_block(u + 10, 1u); atomicCAS(us, (unsigned short)1, (unsigned short)2);
  atomicAnd(ull + 2, 3ull); atomicOr(ll + 3, 3ll); atomicXor(u + 11, 1u); atomicSub(i + 8, 1);
  atomicExch(f + 2, 1.0f); atomicAdd(d + 3, 1.0); atomicMax(ll + 4, 1ll); atomicMin(ull + 3, 1ull);
  // cache hints
  f[3] = __ldcg(f + 4) + __ldca(f + 5) + __ldcs(f + 6) + __ldlu(f + 7) + __ldcv(f + 8);
  __stcg(f + 9, 1.f); __stcs(f + 10, 1.f); __stwb(f + 11, 1.f); __stwt(f + 12, 1.f);
  // bits
  ll[5] = __popcll(ull[4]) + __clzll(ll[6]) + __ffsll(ll[7]) + __brevll(ull[5]) + __mul64hi(ll[8], ll[9])
        + __umul64hi(ull[6], ull[7]) + __funnelshift_r(u[12], u[13], 5) + __umul24(u[14], u[15])
        + __mulhi(i[9], i[10]) + __rhadd(i[11], i[12]) + __uhadd(u[16], u[17]) + __urhadd(u[18], u[19])
        + __sad(i[13], i[14], 1u) + __usad(u[20], u[21], 2u) + labs(ll[10]) + llabs(ll[11]) + abs(ll[12])
        + umin(u[22], u[23]) + umax(u[24], u[25]) + llmin(ll[13], ll[14]) + llmax(ll[15], ll[16])
        + ullmin(ull[8], ull[9]) + ullmax(ull[10], ull[11]) + min(ll[17], ull[12]) + max(u[26], i[15]);
  // reinterpret
  d[4] = __hiloint2double(__double2hiint(d[5]), __double2loint(d[6])) + __uint_as_float(__float_as_uint(f[13]));
  // rounding
  f[14] = __fadd_rz(f[15], f[16]) + __fsub_ru(f[17], f[18]) + __fdiv_rd(f[19], f[20]) + __fsqrt_rn(f[21])
        + __fmaf_rz(f[22], f[23], f[24]) + __frcp_ru(f[25]) + __frsqrt_rn(f[26]) + __int2float_rd(i[16])
        + __uint2float_ru(u[27]) + __ll2float_rz(ll[18]) + __ull2float_rn(ull[13]) + __double2float_rz(d[7]);
  d[8] = __dadd_rn(d[9], d[10]) + __dsub_rz(d[11], d[12]) + __dmul_ru(d[13], d[14]) + __ddiv_rd(d[15], d[16])
       + __drcp_rn(d[17]) + __dsqrt_rz(d[18]) + __fma_ru(d[19], d[20], d[21]) + __ll2double_rn(ll[19])
       + __ull2double_rz(ull[14]) + __int2double_rn(i[17]) + __uint2double_rn(u[28]);
  i[18] = __float2int_rz(f[27]) + __float2uint_ru(f[28]) + __float2ll_rd(f[29]) + __float2ull_rn(f[30])
        + __double2int_rn(d[22]) + __double2uint_rz(d[23]) + __double2ll_ru(d[24]) + __double2ull_rd(d[25]);
  // fast + exact math
  f[31] = __exp10f(f[32]) + __log2f(f[33]) + __log10f(f[34]) + __tanf(f[35]) + __cosf(f[36]) + fdividef(f[37], f[38]);
  float s, c; __sincosf(f[39], &s, &c); f[40] = s + c;
  f[41] = fdimf(f[42], f[43]) + nearbyintf(f[44]) + ldexpf(f[45], 3) + scalbnf(f[46], 2) + nanf("")
        + lrintf(f[47]) + llrintf(f[48]) + lroundf(f[49]) + llroundf(f[50]) + signbit(f[51]) + isfinite(d[26])
        + __isnanf(f[52]) + __isinff(f[53]) + __finitef(f[54]) + __isnan(d[27]) + __isinf(d[28]) + __finite(d[29])
        + CUDART_PI_F + CUDART_INF_F;
  // libdevice
  f[55] = exp10f(f[56]) + expm1f(f[57]) + log1pf(f[58]) + logbf(f[59]) + ilogbf(f[60]) + sinpif(f[61])
        + cospif(f[62]) + asinf(f[63]) + acosf(f[64]) + atanf(f[65]) + atan2f(f[66], f[67]) + sinhf(f[68])
        + coshf(f[69]) + asinhf(f[70]) + acoshf(f[71]) + atanhf(f[72]) + erff(f[73]) + erfcf(f[74])
        + erfinvf(f[75]) + erfcinvf(f[76]) + normcdff(f[77]) + normcdfinvf(f[78]) + lgammaf(f[79])
        + tgammaf(f[80]) + cbrtf(f[81]) + rcbrtf(f[82]) + fmodf(f[83], f[84]) + remainderf(f[85], f[86])
        + hypotf(f[87], f[88]) + nextafterf(f[89], f[90]) + tanf(f[91]) + log10f(f[92]);
  int e; float ip; f[93] = frexpf(f[94], &e) + modff(f[95], &ip) + e + ip;
  double ds, dc; sincos(d[30], &ds, &dc); d[31] = ds + dc + exp(d[32]) + pow(d[33], d[34]) + tanh(d[35]) + rsqrt(d[36]);
  // fp16
  __half a = h[0], b = h[1];
  h[2] = __hsub(a, b) + __hdiv(a, b) + __hneg(a) + __habs(b) + __hmax(a, b) + __hmin(a, b)
       + __hadd_sat(a, b) + __hmul_sat(a, b) + __hfma_sat(a, b, a) + hsqrt(a) + hrsqrt(a) + hrcp(a)
       + hexp(a) + hexp2(a) + hlog(a) + hlog2(a) + hsin(a) + hcos(a) + hfloor(a) + hceil(a) + htrunc(a) + hrint(a);
  i[19] = __heq(a, b) + __hne(a, b) + __hlt(a, b) + __hle(a, b) + __hge(a, b) + __hisnan(a) + __hisinf(a)
        + __half2int_rn(a) + __half2uint_rz(a) + __half2short_rz(a) + __half2ll_rz(a) + __half_as_short(a)
        + (a == b) + (a != b) + (a <= b) + (a >= b);
  __half2 p = h2[0], q = h2[1];
  h2[2] = __hsub2(p, q) + __h2div(p, q) + __hneg2(p) + __habs2(q) + __hmax2(p, q) + __hmin2(p, q)
        + __low2half2(p) + __high2half2(q) + __lows2half2(p, q) + __highs2half2(p, q) + __lowhigh2highlow(p)
        + __halves2half2(__low2half(p), __high2half(q)) + __half2half2(a) + __float22half2_rn(make_float2(1, 2))
        + h2sqrt(p) + h2exp(q) + -p + (p - q) * (p / q);
  p += q; p -= q; p *= q; p /= q; a += b; a -= b; a *= b; a /= b; ++a; --a;
  h2[3] = p; h[3] = +a + __int2half_rn(3) + __uint2half_rn(4u) + __short2half_rn(5) + __ll2half_rn(6ll)
        + __double2half(1.0) + __short_as_half(7) + __float2half_rn(1.f);
  h2[4] = __ldg(h2 + 5) + __shfl_down_sync(~0u, p, 1) + __shfl_up_sync(~0u, p, 1) + __shfl_sync(~0u, p, 1);
  h[4] = __shfl_sync(~0u, a, 0) + __shfl_up_sync(~0u, a, 1) + __shfl_down_sync(~0u, a, 1);
  f[96] = __half22float2(p).y;
  __half_raw raw = a; __half back = raw; h[5] = back;
  atomicAdd(h + 6, a);
  // misc
  managed_counter += 1; g_table[threadIdx.x & 3] = 1.f;
  memset(f + 100, 0, 8); memcpy(f + 104, f + 108, 16);
  ll[20] = clock64() + clock();
  __nanosleep(10);
  if (f[200] < 0) __trap();
  if (f[201] < 0) __brkpt();
  __threadfence_block(); __threadfence_system();
  i[20] = __syncthreads_and(1) + __syncthreads_or(0);
}
__global__ void with_grid_constant(const __grid_constant__ Params p, float *out) { out[0] = p.scale * p.n; }
__global__ void aligned_tile(float *out) { __shared__ __align__(16) float tile[64]; tile[threadIdx.x] = 1; __syncthreads(); out[threadIdx.x] = tile[63 - threadIdx.x]; }
__global__ void bf16_everything(__nv_bfloat16 *b, __nv_bfloat162 *b2, float *f, int *i) {
  __nv_bfloat16 x = b[0], y = __float2bfloat16_rn(f[0]) + __double2bfloat16(1.0) + __int2bfloat16_rn(i[0]);
  b[1] = __hadd(x, y) + __hsub(x, y) * __hmul(x, y) / __hdiv(x, y) + __hfma(x, y, x) + __hneg(x) + __habs(y)
       + __hmax(x, y) + __hmin(x, y) + hsqrt(x) + hexp(y) + hlog(x) + __ushort_as_bfloat16(3) + __low2bfloat16(b2[0]);
  __nv_bfloat162 p = b2[1], q = __floats2bfloat162_rn(1.f, 2.f);
  b2[2] = __hadd2(p, q) + __hmul2(p, q) + __hfma2(p, q, p) + __bfloat162bfloat162(x) + __halves2bfloat162(x, y)
        + __float2bfloat162_rn(f[1]) + __float22bfloat162_rn(make_float2(1, 2)) + __lows2bfloat162(p, q)
        + __shfl_xor_sync(~0u, p, 1) + __ldg(b2 + 3);
  f[2] = __bfloat162float(x) + __low2float(p) + __high2float(p) + __bfloat1622float2(q).y;
  i[1] = __heq(x, y) + (x < y) + __bfloat162int_rn(x) + __bfloat162int_rz(y) + __bfloat16_as_ushort(x) + __hisnan(x);
  atomicAdd(b + 2, x); atomicAdd(b2 + 4, p);
}
