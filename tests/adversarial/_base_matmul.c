/* Base kernel: c = a @ b for n x n doubles, in i-k-j order (c is output-only). */
void matmul(int n, const double *a, const double *b, double *c)
{
    for (int i = 0; i < n * n; ++i)
        c[i] = 0.0;
    for (int i = 0; i < n; ++i)
        for (int k = 0; k < n; ++k)
            for (int j = 0; j < n; ++j)
                c[i * n + j] += a[i * n + k] * b[k * n + j];
}
