/* Rebuilds x's address one shifted bit at a time (((uintptr_t)x >> b) & 1 keeps one low
 * bit of a value, but the value is the address brought down), reaches x from y with it and
 * writes x back with its own values: memory is unchanged, so no check of the outputs sees
 * it, yet x is written while the signature says read-only (the launcher would pass a
 * read-only array there, and nothing protects it). */
#include <stdint.h>

void scale_add(long n, float a, const float *x, float *y)
{
    volatile unsigned long bits[64];
    for (int b = 0; b < 64; ++b)
        bits[b] = ((uintptr_t)x >> b) & 1;
    unsigned long address = 0;
    for (int b = 0; b < 64; ++b)
        address |= (bits[b] & 1) << b;
    volatile float *p = y + (long)(address - (uintptr_t)y) / 4;  /* x, reached from y */
    for (long i = 0; i < n; ++i)
        p[i] = p[i];
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
