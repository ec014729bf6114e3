/* Walks the arrays from the end: right out of place and in place (x == y), wrong for the
 * in-place shift scale_add(n, a, buf + 1, buf) that the original's forward loop gets
 * right and that no test makes. */
void scale_add(long n, float a, const float *x, float *y)
{
    for (long i = n - 1; i >= 0; --i)
        y[i] = a * x[i] + 1.0f;
}
