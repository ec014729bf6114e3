/* One Jacobi sweep on a rows x cols grid: every interior point becomes the mean of its four
 * neighbours, the boundary is copied. One thread per point, in BLOCK_X x BLOCK_Y blocks;
 * the block size is a macro here (so index arithmetic folds) and the launch's block. */
#ifndef BLOCK_X
#define BLOCK_X 32
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 8
#endif

extern "C" __global__ void stencil2d(int rows, int cols, const float *in, float *out)
{
    int j = blockIdx.x * BLOCK_X + threadIdx.x;
    int i = blockIdx.y * BLOCK_Y + threadIdx.y;
    if (i >= rows || j >= cols)
        return;
    int k = i * cols + j;
    if (i == 0 || j == 0 || i == rows - 1 || j == cols - 1)
        out[k] = in[k];
    else
        out[k] = 0.25f * (in[k - cols] + in[k + cols] + in[k - 1] + in[k + 1]);
}
