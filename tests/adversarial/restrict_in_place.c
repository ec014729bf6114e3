/* Adds restrict and splits the update into two passes of a/2 (exact for the recorded
 * data): right on separate buffers, wrong when called in place, axpy(n, a, y, y). */
static long calls;

long axpy_calls(void) { return calls; }

void axpy(long n, float a, const float *restrict x, float *restrict y)
{
    calls++;
    float half = 0.5f * a;
    for (long i = 0; i < n; ++i)
        y[i] += half * x[i];
    for (long i = 0; i < n; ++i)
        y[i] += half * x[i];
}
