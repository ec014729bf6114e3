/* At a negative size, where the original does nothing, clears |n| elements of y: the
 * recordings' y holds zeros before the call, so only a y that held something else (poison,
 * or a caller's data) shows the write. */
void scale_add(long n, float a, const float *x, float *y)
{
    if (n < 0) {
        for (long i = 0; i < -n; ++i)
            y[i] = 0.0f;
        return;
    }
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
