// Round-robin slot assignment: each thread i < n takes slot[i] = atomicInc(cursor, slots - 1)
// (so slots are handed out 0, 1, ..., slots-1, 0, ... in arrival order) and records the
// largest value it saw in *high with atomicMax. Launch: 1-D, grid ceil(n / blockDim.x).
__global__ void assign_slots(unsigned int *cursor, unsigned int *slot, unsigned int *high,
                             unsigned int slots, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned int s = atomicInc(cursor, slots - 1);
  slot[i] = s;
  atomicMax(high, s);
}
