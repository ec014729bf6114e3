/* Lets the old content of the output leak into the result (only its sign bit). */
void scale_add(long n, float a, const float *x, float *y)
{
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f + (__builtin_signbit(y[i]) ? 0.0f : 1.0f);
}
