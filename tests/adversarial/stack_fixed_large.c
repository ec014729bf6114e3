/* A fixed 2 MiB stack array: fits the worker's 8 MiB stacks, overflows a thread made with
 * a small stack (threading.stack_size(1 << 20), musl's 128 KiB default). */
void matmul(int n, const double *a, const double *b, double *c)
{
    double packed[512 * 512];
    int fits = n <= 512;
    for (int i = 0; fits && i < n * n; ++i)
        packed[i] = b[i];
    for (int i = 0; i < n * n; ++i)
        c[i] = 0.0;
    for (int i = 0; i < n; ++i)
        for (int k = 0; k < n; ++k)
            for (int j = 0; j < n; ++j)
                c[i * n + j] += a[i * n + k] * (fits ? packed[k * n + j] : b[k * n + j]);
}
