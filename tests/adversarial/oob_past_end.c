/* Writes one element past the end of y. */
void scale_add(long n, float a, const float *x, float *y)
{
    for (long i = 0; i <= n; ++i)
        y[i] = a * x[i < n ? i : 0] + 1.0f;
}
