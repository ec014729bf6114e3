/* The same scratch through __builtin_alloca(n * n * 8): a stack allocation whose size the
 * arguments set. */
void matmul(int n, const double *a, const double *b, double *c)
{
    double *packed = __builtin_alloca((unsigned long)n * n * sizeof(double));
    for (int i = 0; i < n * n; ++i)
        packed[i] = b[i];
    for (int i = 0; i < n * n; ++i)
        c[i] = 0.0;
    for (int i = 0; i < n; ++i)
        for (int k = 0; k < n; ++k)
            for (int j = 0; j < n; ++j)
                c[i * n + j] += a[i * n + k] * packed[k * n + j];
}
