/* A scalar head up to y's next 16-byte boundary (for y % 16 == 4 or 12; 8 is
 * "forgotten"), then the body on the rounded-down aligned address. At y % 16 == 8 the body
 * starts two elements before y: it overwrites the two floats before the buffer (the
 * previous row of the caller's matrix) and leaves two elements of y unwritten. No vector
 * type, no crash: silent corruption only where y is 8 bytes off. */
void scale_add(long n, float a, const float *x, float *y)
{
    unsigned long mis = (unsigned long)y & 15;
    long head = mis == 4 ? 3 : mis == 12 ? 1 : 0;
    if (head > n)
        head = n;
    long i = 0;
    for (; i < head; ++i)
        y[i] = a * x[i] + 1.0f;
    float *ya = (float *)((unsigned long)(y + i) & ~15UL);
    const float *xa = x + (ya - y);
    long m = n > i ? (n - i) & ~3L : 0;
    for (long k = 0; k < m; ++k)
        ya[k] = a * xa[k] + 1.0f;
    for (i += m; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
