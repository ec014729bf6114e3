/* A correct rewrite: the same i-k-j product with the row of c kept in a local pointer and
 * the inner loop unrolled by two (exact: each element's sum is in the same order). */
void matmul(int n, const double *a, const double *b, double *c)
{
    for (int i = 0; i < n * n; ++i)
        c[i] = 0.0;
    for (int i = 0; i < n; ++i) {
        double *row = c + (long)i * n;
        for (int k = 0; k < n; ++k) {
            double aik = a[i * n + k];
            const double *brow = b + (long)k * n;
            int j = 0;
            for (; j + 1 < n; j += 2) {
                row[j] += aik * brow[j];
                row[j + 1] += aik * brow[j + 1];
            }
            for (; j < n; ++j)
                row[j] += aik * brow[j];
        }
    }
}
