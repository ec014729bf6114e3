/* b packed into a stack array of n * n doubles (a VLA): exact and no state, but its stack
 * use grows with n * n, so a 1024 x 1024 product overflows an 8 MiB main-thread stack and a
 * 384 x 384 one a 1 MiB thread stack, sizes no recording reaches. */
void matmul(int n, const double *a, const double *b, double *c)
{
    double packed[n * n];
    for (int i = 0; i < n * n; ++i)
        packed[i] = b[i];
    for (int i = 0; i < n * n; ++i)
        c[i] = 0.0;
    for (int i = 0; i < n; ++i)
        for (int k = 0; k < n; ++k)
            for (int j = 0; j < n; ++j)
                c[i * n + j] += a[i * n + k] * packed[k * n + j];
}
