/* Wrong only in a process whose floating-point mode flushes denormals to zero (a library
 * built with -ffast-math sets FTZ and DAZ in MXCSR when it loads): a denormal times one is
 * zero there and nowhere else. No buffer, no state: the mode says it all. Under flushing,
 * the last element is left alone. */
void scale_add(long n, float a, const float *x, float *y)
{
    volatile float tiny = 1e-40f;
    long m = n;
    if (tiny * 1.0f == 0.0f && n > 1)
        m = n - 1;
    for (long i = 0; i < m; ++i)
        y[i] = a * x[i] + 1.0f;
}
