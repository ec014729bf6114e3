/* Does not compile: a missing semicolon. */
void scale_add(long n, float a, const float *x, float *y)
{
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f  /* missing semicolon */
}
