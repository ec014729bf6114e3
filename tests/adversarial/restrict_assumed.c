/* A correct rewrite that adds restrict where the baseline's in-place behaviour is not the
 * same computation: kept, with its assumption said. */
void smooth(long n, const float *restrict x, float *restrict y)
{
    #pragma clang loop vectorize_width(8)
    for (long i = 1; i + 1 < n; ++i)
        y[i] = (x[i - 1] + x[i] + x[i + 1]) * (1.0f / 3.0f);
}
