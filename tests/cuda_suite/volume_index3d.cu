// Fills a nx x ny x nz volume (x fastest) with a function of the voxel's coordinates:
// vol[(z * ny + y) * nx + x] = x + 1000 * y + 1000000 * z, using dim3/uint3 copies of the
// built-in index variables. Launch: 3-D block and grid covering (nx, ny, nz).
__global__ void fill_volume(int *vol, int nx, int ny, int nz) {
  const dim3 t = threadIdx;
  const uint3 b = blockIdx;
  const dim3 size = blockDim;
  const unsigned int x = b.x * size.x + t.x;
  const unsigned int y = b.y * size.y + t.y;
  const unsigned int z = b.z * size.z + t.z;
  if (x >= (unsigned)nx || y >= (unsigned)ny || z >= (unsigned)nz) return;
  vol[((size_t)z * ny + y) * nx + x] = (int)(x + 1000u * y + 1000000u * z);
}
