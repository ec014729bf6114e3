/* r3_hip_shuffles.h: HIP's wavefront shuffles and votes over 64 lanes, shared by the AMDGCN
 * device build (r3_hip.h) and HIP emulation on the CPU (r3_hip_host.h). Each side defines
 * __R3_HIP_FN (how a function is defined), __R3_HIP_DECL (how one is only declared),
 * __R3_HIP_SHUFFLE(mask, v, lane, width, kind) (kind: 0 index, 1 up, 2 down, 3 xor) and
 * __R3_HIP_BALLOT(mask, p) (the lanes of `mask` whose predicate holds) before including it.
 *
 * The *_sync forms take a 64-bit mask, as ROCm's: a 32-bit mask (0xffffffff, written for
 * CUDA's 32-lane warps) names half a wavefront, so it is refused where it is written. */
#ifndef R3_HIP_SHUFFLES_H
#define R3_HIP_SHUFFLES_H

template <typename T> __R3_HIP_FN T __shfl(T v, int lane, int width = warpSize) {
  return __R3_HIP_SHUFFLE(~0ull, v, lane, width, 0); }
template <typename T> __R3_HIP_FN T __shfl_up(T v, unsigned int delta, int width = warpSize) {
  return __R3_HIP_SHUFFLE(~0ull, v, (int)delta, width, 1); }
template <typename T> __R3_HIP_FN T __shfl_down(T v, unsigned int delta,
                                               int width = warpSize) {
  return __R3_HIP_SHUFFLE(~0ull, v, (int)delta, width, 2); }
template <typename T> __R3_HIP_FN T __shfl_xor(T v, int lane_mask, int width = warpSize) {
  return __R3_HIP_SHUFFLE(~0ull, v, lane_mask, width, 3); }

#define __R3_MASK32_MESSAGE                                                                \
  "HIP wavefronts have 64 lanes: the mask of a *_sync wavefront function must be a "       \
  "64-bit integer (e.g. 0xffffffffffffffffull); a 32-bit mask written for CUDA's "         \
  "32-lane warps names only half of the wavefront (see docs/hip.md)"
#define __R3_SYNC_SHUFFLE(name, lane_type, kind)                                           \
  template <typename T> __R3_HIP_FN T name(unsigned long long mask, T v, lane_type lane,   \
                                           int width = warpSize) {                         \
    return __R3_HIP_SHUFFLE(mask, v, (int)lane, width, kind); }                            \
  template <typename T> __R3_HIP_FN T name(unsigned long mask, T v, lane_type lane,        \
                                           int width = warpSize) {                         \
    return __R3_HIP_SHUFFLE((unsigned long long)mask, v, (int)lane, width, kind); }        \
  template <typename T> __R3_HIP_DECL T name(unsigned int mask, T v, lane_type lane,      \
                                             int width = 0)                                \
      __attribute__((unavailable(__R3_MASK32_MESSAGE)));                                   \
  template <typename T> __R3_HIP_DECL T name(int mask, T v, lane_type lane, int width = 0) \
      __attribute__((unavailable(__R3_MASK32_MESSAGE)));
__R3_SYNC_SHUFFLE(__shfl_sync, int, 0)
__R3_SYNC_SHUFFLE(__shfl_up_sync, unsigned int, 1)
__R3_SYNC_SHUFFLE(__shfl_down_sync, unsigned int, 2)
__R3_SYNC_SHUFFLE(__shfl_xor_sync, int, 3)
#undef __R3_SYNC_SHUFFLE
#define __R3_SYNC_VOTE(name, result, expression)                                           \
  __R3_HIP_FN result name(unsigned long long mask, int p) { return expression; }           \
  __R3_HIP_FN result name(unsigned long mask, int p) {                                     \
    return name((unsigned long long)mask, p); }                                            \
  __R3_HIP_DECL result name(unsigned int mask, int p)                                      \
      __attribute__((unavailable(__R3_MASK32_MESSAGE)));                                   \
  __R3_HIP_DECL result name(int mask, int p) __attribute__((unavailable(__R3_MASK32_MESSAGE)));
__R3_SYNC_VOTE(__ballot_sync, unsigned long long, __R3_HIP_BALLOT(mask, p))
__R3_SYNC_VOTE(__any_sync, int, __R3_HIP_BALLOT(mask, p) != 0)
__R3_SYNC_VOTE(__all_sync, int, __R3_HIP_BALLOT(mask, p) == __R3_HIP_BALLOT(mask, 1))
#undef __R3_SYNC_VOTE
#endif
