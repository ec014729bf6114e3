/* address_bits_write_input.c through comparisons only: each bit of x's address is found by
 * comparing x with a threshold (a branch, then a constant or'ed in), which a walk of the
 * address's uses cannot follow. It reaches x from y with the rebuilt address and writes
 * x back with its own values: no output changes, and x is written while taken as
 * read-only. */
#include <stdint.h>

void scale_add(long n, float a, const float *x, float *y)
{
    unsigned long address = 0;
    for (int b = 63; b >= 0; --b) {
        volatile unsigned long bit = 1UL << b;
        if ((uintptr_t)x >= (address | bit))
            address |= bit;
    }
    volatile float *p = y + (long)(address - (uintptr_t)y) / 4;  /* x, reached from y */
    for (long i = 0; i < n; ++i)
        p[i] = p[i];
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
