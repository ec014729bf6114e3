/* Writes through a null pointer. */
void scale_add(long n, float a, const float *x, float *y)
{
    for (long i = 0; i < n; ++i) {
        y[i] = a * x[i] + 1.0f;
        if (i == 3)
            *(volatile float *)0 = y[i];
    }
}
