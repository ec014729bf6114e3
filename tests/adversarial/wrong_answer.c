/* Off by 0.5 at one element. */
void scale_add(long n, float a, const float *x, float *y)
{
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f + (i == 7 ? 0.5f : 0.0f);
}
