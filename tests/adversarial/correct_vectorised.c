/* A correct rewrite: forced vector width, interleaved, restrict (y never aliases x here). */
void scale_add(long n, float a, const float *restrict x, float *restrict y)
{
    #pragma clang loop vectorize_width(8) interleave_count(2)
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
