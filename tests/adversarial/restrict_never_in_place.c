/* Adds restrict and splits the update in two passes: right on separate buffers, which is
 * all the oracle test passes; wrong in place, axpby(n, a, y, b, y), which callers may use. */
void axpby(long n, float a, const float *restrict x, float b, float *restrict y)
{
    for (long i = 0; i < n; ++i)
        y[i] = b * y[i];
    for (long i = 0; i < n; ++i)
        y[i] += a * x[i];
}
