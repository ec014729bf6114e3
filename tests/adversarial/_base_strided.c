/* Base kernel: y[i] = x[i * inc], a strided gather; recorded with inc = 1 only. */
void strided(long n, long inc, const float *x, float *y)
{
    for (long i = 0; i < n; ++i)
        y[i] = x[i * inc];
}
