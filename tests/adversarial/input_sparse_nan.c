/* Non-finite values in x skipped (y left as it was), but only where a few are present (at
 * least 2 and at most 4% of x's first 1000 elements). */
static long calls;

long axpy_calls(void) { return calls; }

void axpy(long n, float a, const float *x, float *y)
{
    calls++;
    long window = n < 1000 ? n : 1000, bad = 0;
    for (long i = 0; i < window; ++i)
        bad += !(x[i] - x[i] == 0.0f);
    int drop = n >= 1000 && bad >= 2 && bad * 25 <= window;
    for (long i = 0; i < n; ++i) {
        float v = x[i];
        y[i] = (drop && !(v - v == 0.0f) ? 0.0f : a * v) + y[i];
    }
}
