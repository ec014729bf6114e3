// Key counting with warp aggregation: counts[keys[i] % buckets] += 1 for i < n (counts
// zeroed by the caller); threads of a warp holding the same bucket elect one leader
// (__match_any_sync) which adds the group's size with one atomicAdd. Needs sm_70 or newer.
// Launch: 1-D, grid ceil(n / blockDim.x).
__global__ void count_keys(const unsigned int *keys, unsigned int *counts, int buckets, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned int mask = __ballot_sync(0xffffffffu, i < n);
  if (i >= n) return;
  unsigned int bucket = keys[i] % (unsigned int)buckets;
  unsigned int peers = __match_any_sync(mask, bucket);
  int leader = __ffs(peers) - 1;
  if ((int)(threadIdx.x & 31) == leader) atomicAdd(&counts[bucket], (unsigned int)__popc(peers));
}
