/* Peels y to a 16-byte boundary, then stores four outputs at a time through a 16-byte
 * vector type (an aligned store). The peel handles y % 16 == 4 and 12 and forgets 8:
 * right on fresh arrays and on a[1:], a fault on a[2:] or on a row of a float32 matrix
 * whose width is 2 mod 4. */
typedef float f4 __attribute__((vector_size(16)));

void scale_add(long n, float a, const float *x, float *y)
{
    unsigned long mis = (unsigned long)y & 15;
    long peel = mis == 4 ? 3 : mis == 12 ? 1 : 0;
    long i = 0;
    for (; i < peel && i < n; ++i)
        y[i] = a * x[i] + 1.0f;
    for (; i + 4 <= n; i += 4) {
        f4 xv = {x[i], x[i + 1], x[i + 2], x[i + 3]};
        *(f4 *)(y + i) = a * xv + 1.0f;
    }
    for (; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
