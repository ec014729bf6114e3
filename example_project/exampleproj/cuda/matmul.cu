/* c = a @ b for row-major a (m x k), b (k x n), c (m x n). Each TILE x TILE block computes
 * one tile of c, staging tiles of a and b through shared memory. */
#ifndef TILE
#define TILE 16
#endif

extern "C" __global__ void matmul_tiled(int m, int n, int k, const float *a, const float *b,
                                        float *c)
{
    __shared__ float a_tile[TILE][TILE];
    __shared__ float b_tile[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    float sum = 0.0f;
    for (int base = 0; base < k; base += TILE) {
        a_tile[ty][tx] = (row < m && base + tx < k) ? a[row * k + base + tx] : 0.0f;
        b_tile[ty][tx] = (base + ty < k && col < n) ? b[(base + ty) * n + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int q = 0; q < TILE; ++q)
            sum += a_tile[ty][q] * b_tile[q][tx];
        __syncthreads();
    }
    if (row < m && col < n)
        c[row * n + col] = sum;
}
