/* Base kernel: y = a * x + b * y, which callers may call in place (axpby(n, a, y, b, y)),
 * though its oracle test never does; recorded out of place with b = 0. */
void axpby(long n, float a, const float *x, float b, float *y)
{
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + b * y[i];
}
