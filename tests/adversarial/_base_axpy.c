/* Base kernel: y = a * x + y, in place capable (y is in-out; axpy(n, a, y, y) is valid).
 * Its benign call counter is writable module-level state that candidates may keep. */
static long calls;

long axpy_calls(void) { return calls; }

void axpy(long n, float a, const float *x, float *y)
{
    calls++;
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + y[i];
}
