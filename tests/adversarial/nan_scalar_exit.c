/* A "fast exit" when the scalar is not a number: the original makes every y NaN there,
 * this leaves y as it was. Right on every finite scalar. */
void scale_add(long n, float a, const float *x, float *y)
{
    if (a != a)
        return;
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
