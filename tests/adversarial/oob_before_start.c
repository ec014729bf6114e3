/* Writes two elements before the start of y. */
void scale_add(long n, float a, const float *x, float *y)
{
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
    y[-2] = 1.0f;
}
