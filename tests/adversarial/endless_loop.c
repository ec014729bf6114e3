/* Never returns. */
void scale_add(long n, float a, const float *x, float *y)
{
    volatile int spin = 1;
    while (spin) {
    }
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
