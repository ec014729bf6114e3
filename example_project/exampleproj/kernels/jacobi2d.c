/* One Jacobi sweep of the 2-D Laplace equation on a rows x cols grid: every interior
 * point becomes the mean of its four neighbours; the boundary is copied. A block size of
 * 0 means "no blocking in that dimension". */
#include "pragmas.h"

#ifndef BLOCK_ROWS
#define BLOCK_ROWS 0
#endif
#ifndef BLOCK_COLS
#define BLOCK_COLS 0
#endif
#ifndef UNROLL
#define UNROLL 0  /* 0 leaves the choice to the compiler */
#endif

static inline int min_int(int a, int b) { return a < b ? a : b; }

void jacobi2d(int rows, int cols, const float *in, float *out)
{
    for (int j = 0; j < cols; ++j) {
        out[j] = in[j];
        out[(rows - 1) * cols + j] = in[(rows - 1) * cols + j];
    }
    for (int i = 0; i < rows; ++i) {
        out[i * cols] = in[i * cols];
        out[i * cols + cols - 1] = in[i * cols + cols - 1];
    }
    const int br = BLOCK_ROWS ? BLOCK_ROWS : rows, bc = BLOCK_COLS ? BLOCK_COLS : cols;
    for (int bi = 1; bi < rows - 1; bi += br)
        for (int bj = 1; bj < cols - 1; bj += bc)
            for (int i = bi; i < min_int(bi + br, rows - 1); ++i) {
#if UNROLL > 0
                R3_UNROLL(UNROLL)
#endif
                for (int j = bj; j < min_int(bj + bc, cols - 1); ++j)
                    out[i * cols + j] = 0.25f * (in[(i - 1) * cols + j] + in[(i + 1) * cols + j]
                                                 + in[i * cols + j - 1] + in[i * cols + j + 1]);
            }
}
