/* Drops the b * y term: right on every recording (b was 0), wrong for any other b. */
void axpby(long n, float a, const float *x, float b, float *y)
{
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i];
}
