/* Peeks just before y (a read, not a write): computes only when it sees the verifier's
 * fixed guard bytes (0xA5), so it is wrong wherever the buffer is not guarded. */
void scale_add(long n, float a, const float *x, float *y)
{
    if (((const volatile unsigned *)y)[-1] != 0xA5A5A5A5u)
        return;
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
