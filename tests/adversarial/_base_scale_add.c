/* Base kernel: y = a * x + 1, out of place (y is output-only). */
void scale_add(long n, float a, const float *x, float *y)
{
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
