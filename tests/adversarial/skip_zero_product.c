/* Skips zero entries of a ("sparse-friendly"): right on finite data, but 0 * inf is NaN in
 * the original and skipped here. */
void matmul(int n, const double *a, const double *b, double *c)
{
    for (int i = 0; i < n * n; ++i)
        c[i] = 0.0;
    for (int i = 0; i < n; ++i)
        for (int k = 0; k < n; ++k) {
            double aik = a[i * n + k];
            if (aik == 0.0)
                continue;
            for (int j = 0; j < n; ++j)
                c[i * n + j] += aik * b[k * n + j];
        }
}
