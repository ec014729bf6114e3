/* Sixteen outputs at a time; the remainder is one full sixteen-wide block that puts back,
 * past the end of y, the values it read there (through volatile, so the stores stay). No
 * guard byte changes, so no out-of-bounds check sees it; in production it faults when y
 * ends just below a read-only mapping (np.load(..., mmap_mode='r') after it). */
void scale_add(long n, float a, const float *x, float *y)
{
    long i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 16; ++k)
            y[i + k] = a * x[i + k] + 1.0f;
    if (i < n) {
        volatile float *tail = y + i;
        for (long k = 0; k < 16; ++k) {
            float old = tail[k];
            tail[k] = i + k < n ? a * x[i + k] + 1.0f : old;
        }
    }
}
