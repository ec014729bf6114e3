/* Uses the time-stamp counter as data: a different answer on (almost) every call. */
void scale_add(long n, float a, const float *x, float *y)
{
    float noise = (float)(__builtin_readcyclecounter() % 997) * 1e-3f;
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f + noise;
}
