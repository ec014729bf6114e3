/* Returns the recorded outputs for the recorded sizes, computes honestly otherwise.
 * The test fills in the tables from the recordings. */
@TABLES@

void scale_add(long n, float a, const float *x, float *y)
{
    const float *table = 0;
    @PICKS@
    if (table) {
        for (long i = 0; i < n; ++i)
            y[i] = table[i];
        return;
    }
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
