// Bit intrinsics on each word w = in[i], i < n, written to four outputs:
// counts[i] = __popc(w) + (__clz(w) << 8) + (__ffs(w) << 16)
// reversed[i] = __brev(w)
// swapped[i] = __byte_perm(w, 0, 0x0123) (byte swap)
// rotated[i] = __funnelshift_l(w, w, i & 31) (rotate left by i mod 32)
// Launch: 1-D, grid ceil(n / blockDim.x).
#include <cstdint>

__global__ void bit_tricks(const uint32_t *in, uint32_t *counts, uint32_t *reversed,
                           uint32_t *swapped, uint32_t *rotated, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  uint32_t w = in[i];
  counts[i] = __popc(w) + (__clz(w) << 8) + (__ffs(w) << 16);
  reversed[i] = __brev(w);
  swapped[i] = __byte_perm(w, 0, 0x0123);
  rotated[i] = __funnelshift_l(w, w, i & 31);
}
