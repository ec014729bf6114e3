/* A 64 MiB stack allocation, touched page by page from the top down as a compiler's stack
 * probes would: the stack outgrows its limit (8 MiB by default). */
void scale_add(long n, float a, const float *x, float *y)
{
    volatile char *scratch = __builtin_alloca(1L << 26);
    for (long k = (1L << 26) - 1; k >= 0; k -= 4096)
        scratch[k] = 1;
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f + scratch[0] * 0.0f;
}
