// Stream compaction: copies every x[i] > threshold (i < n) to out, in an order that is
// stable within each warp, and counts them in *count (zeroed by the caller). Each warp
// ranks its kept elements with __ballot_sync and __popc, reserves room with one atomicAdd.
// Launch: 1-D, blockDim.x a multiple of 32.
__global__ void compact_above(const float *x, float *out, unsigned int *count, float threshold,
                              int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned int lane = threadIdx.x & 31;
  const bool keep = i < n && x[i] > threshold;
  const unsigned int active = __activemask();
  const unsigned int votes = __ballot_sync(active, keep);
  const unsigned int rank = __popc(votes & ((1u << lane) - 1u));
  unsigned int base = 0;
  const int leader = __ffs(active) - 1;
  if ((int)lane == leader) base = atomicAdd(count, __popc(votes));
  base = __shfl_sync(active, base, leader);
  if (keep) out[base + rank] = x[i];
}
