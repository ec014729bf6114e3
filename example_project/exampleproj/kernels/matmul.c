/* c = a @ b for row-major n x n matrices, naive i-j-k order (strided reads of b) with
 * optional cache blocking; a tile size of 0 means "no blocking on that loop". */
#ifndef TILE_I
#define TILE_I 0
#endif
#ifndef TILE_J
#define TILE_J 0
#endif
#ifndef TILE_K
#define TILE_K 0
#endif

static inline int min_int(int a, int b) { return a < b ? a : b; }

void matmul(int n, const double *a, const double *b, double *c)
{
    const int ti = TILE_I ? TILE_I : n, tj = TILE_J ? TILE_J : n, tk = TILE_K ? TILE_K : n;
    for (int i = 0; i < n * n; ++i)
        c[i] = 0.0;
    for (int ii = 0; ii < n; ii += ti)
        for (int jj = 0; jj < n; jj += tj)
            for (int kk = 0; kk < n; kk += tk)
                for (int i = ii; i < min_int(ii + ti, n); ++i)
                    for (int j = jj; j < min_int(jj + tj, n); ++j) {
                        double sum = c[i * n + j];
                        for (int k = kk; k < min_int(kk + tk, n); ++k)
                            sum += a[i * n + k] * b[k * n + j];
                        c[i * n + j] = sum;
                    }
}
