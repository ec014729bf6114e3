/* scaled_add rewritten to do its work in two passes, the even elements and then the odd
 * ones, where x and y do not overlap (callers also update y in place from an overlapping
 * x: those calls take the plain loop, whose order they rely on): the same results, but
 * every cache line of x and y is brought in twice. A known slowdown (about 0.5x) for
 * bench_timing_trust.py: y = alpha * x + y is bound by memory, so no correct rewrite of
 * it is twice as fast, and a ratio of 0.5 tests the measurement as well as one of 2. */
void scaled_add(long n, float alpha, const float *x, float *y)
{
    unsigned long xs = (unsigned long)x, ys = (unsigned long)y;
    unsigned long bytes = (unsigned long)n * sizeof(float);
    if (n > 0 && xs < ys + bytes && ys < xs + bytes) {
        for (long i = 0; i < n; ++i)
            y[i] = alpha * x[i] + y[i];
        return;
    }
    for (long i = 0; i < n; i += 2)
        y[i] = alpha * x[i] + y[i];
    for (long i = 1; i < n; i += 2)
        y[i] = alpha * x[i] + y[i];
}
