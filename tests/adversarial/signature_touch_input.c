/* Writes x's first element back with its own value: memory is unchanged, so no check
   sees it, but the user's launcher then takes x as written and refuses every read-only
   array (np.load(..., mmap_mode='r'), np.frombuffer). */
void scale_add(long n, float a, const float *x, float *y)
{
    if (n > 0)
        *(volatile float *)x = x[0];
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
