/* matmul (c = a @ b, row-major n x n) with its first third of rows blocked over k, 32 at
 * a time (those 32 rows of b stay in cache while a row of c is summed), and the other
 * rows in the plain i-j-k order. Each element is summed in the same order as the
 * baseline's, so the results are the same bit for bit. A known speedup of about 1.2x for
 * bench_timing_trust.py: blocking every row (TILE_K=32) is about 2.3x. */
#define K_BLOCK 32

void matmul(int n, const double *a, const double *b, double *c)
{
    const int blocked = n / 3;
    for (int i = 0; i < n * n; ++i)
        c[i] = 0.0;
    for (int kk = 0; kk < n; kk += K_BLOCK) {
        const int k_end = kk + K_BLOCK < n ? kk + K_BLOCK : n;
        for (int i = 0; i < blocked; ++i)
            for (int j = 0; j < n; ++j) {
                double sum = c[i * n + j];
                for (int k = kk; k < k_end; ++k)
                    sum += a[i * n + k] * b[k * n + j];
                c[i * n + j] = sum;
            }
    }
    for (int i = blocked; i < n; ++i)
        for (int j = 0; j < n; ++j) {
            double sum = c[i * n + j];
            for (int k = 0; k < n; ++k)
                sum += a[i * n + k] * b[k * n + j];
            c[i * n + j] = sum;
        }
}
