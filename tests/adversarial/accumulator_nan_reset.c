/* Treats a NaN already held in the accumulator y as zero ("robust" accumulation): the same on
 * every finite y a test draws; where the original leaves y[i] NaN it writes a * x[i]. */
static long calls;

long axpy_calls(void) { return calls; }

void axpy(long n, float a, const float *x, float *y)
{
    calls++;
    for (long i = 0; i < n; ++i) {
        float old = y[i];
        y[i] = a * x[i] + (old != old ? 0.0f : old);
    }
}
