// Inclusive prefix sum within each block: out[i] = sum of in[j] for j from the block's first
// element to i (elements past n count as 0). Warp scans with __shfl_up_sync, then the warp
// totals scanned by the first warp. Launch: 1-D, blockDim.x a multiple of 32, at most 1024.
__global__ void block_inclusive_scan(const int *in, int *out, int n) {
  __shared__ int warp_totals[32];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int v = i < n ? in[i] : 0;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    int up = __shfl_up_sync(0xffffffffu, v, offset);
    if (lane >= offset) v += up;
  }
  if (lane == 31) warp_totals[warp] = v;
  __syncthreads();
  if (warp == 0) {
    int total = lane < (blockDim.x >> 5) ? warp_totals[lane] : 0;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
      int up = __shfl_up_sync(0xffffffffu, total, offset);
      if (lane >= offset) total += up;
    }
    warp_totals[lane] = total;
  }
  __syncthreads();
  if (warp > 0) v += warp_totals[warp - 1];
  if (i < n) out[i] = v;
}
