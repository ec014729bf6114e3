/* A correct rewrite that keeps the baseline's own counter: unrolled by 4, remainder loop. */
static long calls;

long axpy_calls(void) { return calls; }

void axpy(long n, float a, const float *x, float *y)
{
    calls++;
    long i = 0;
    for (; i + 4 <= n; i += 4) {
        y[i] = a * x[i] + y[i];
        y[i + 1] = a * x[i + 1] + y[i + 1];
        y[i + 2] = a * x[i + 2] + y[i + 2];
        y[i + 3] = a * x[i + 3] + y[i + 3];
    }
    for (; i < n; ++i)
        y[i] = a * x[i] + y[i];
}
