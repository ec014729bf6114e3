/* The first four outputs through one vector store: the vector type's natural alignment
 * (16 bytes) makes it an aligned store, with no restrict, no alignment attribute and no
 * pointer test in sight. Right on every 16-byte aligned buffer; a fault on y = a[1:]. */
typedef float f4 __attribute__((vector_size(16)));

void scale_add(long n, float a, const float *x, float *y)
{
    long i = 0;
    if (n >= 4) {
        f4 xv = {x[0], x[1], x[2], x[3]};
        *(f4 *)y = a * xv + 1.0f;
        i = 4;
    }
    for (; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
