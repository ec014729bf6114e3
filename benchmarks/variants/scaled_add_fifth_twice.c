/* scaled_add with its first fifth done in two passes (even elements, then odd ones) and
 * the rest in one, where x and y do not overlap (see scaled_add_two_passes.c): the same
 * results; a known slowdown of about 1/1.2 for bench_timing_trust.py. */
void scaled_add(long n, float alpha, const float *x, float *y)
{
    unsigned long xs = (unsigned long)x, ys = (unsigned long)y;
    unsigned long bytes = (unsigned long)n * sizeof(float);
    long head = n / 5;
    if (n > 0 && xs < ys + bytes && ys < xs + bytes)
        head = 0;
    head -= head & 1;
    for (long i = 0; i < head; i += 2)
        y[i] = alpha * x[i] + y[i];
    for (long i = 1; i < head; i += 2)
        y[i] = alpha * x[i] + y[i];
    for (long i = head; i < n; ++i)
        y[i] = alpha * x[i] + y[i];
}
