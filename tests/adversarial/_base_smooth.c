/* Base kernel: a three-point average, out of place; called in place it reads values it has
 * already written, so in place is not the same computation. */
void smooth(long n, const float *x, float *y)
{
    for (long i = 1; i + 1 < n; ++i)
        y[i] = (x[i - 1] + x[i] + x[i + 1]) * (1.0f / 3.0f);
}
