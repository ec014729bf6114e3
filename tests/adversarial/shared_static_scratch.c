/* Exact on one thread at a time: the products go through a static scratch array, shared
 * by every call. Two threads calling it at once on their own arrays (a thread pool's
 * production use) overwrite each other's scratch and get each other's numbers. */
static float scratch[4096];

void scale_add(long n, float a, const float *x, float *y)
{
    for (long start = 0; start < n; start += 4096) {
        long count = n - start < 4096 ? n - start : 4096;
        for (long i = 0; i < count; ++i)
            scratch[i] = a * x[start + i];
        for (long i = 0; i < count; ++i)
            y[start + i] = scratch[i] + 1.0f;
    }
}
