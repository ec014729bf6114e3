/* A NaN at one element. */
void scale_add(long n, float a, const float *x, float *y)
{
    for (long i = 0; i < n; ++i)
        y[i] = i == 5 ? __builtin_nanf("") : a * x[i] + 1.0f;
}
