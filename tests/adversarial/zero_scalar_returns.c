/* Nothing to add when a is zero, so it returns at once: y = 0 * x + y is y wherever x is
 * finite, but 0 * inf and 0 * NaN are NaN, which the early return never writes. */
static long calls;

long axpy_calls(void) { return calls; }

void axpy(long n, float a, const float *x, float *y)
{
    calls++;
    if (a == 0.0f)
        return;
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + y[i];
}
