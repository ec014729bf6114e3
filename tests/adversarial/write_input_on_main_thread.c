/* address_compared_write_input.c, done only on the main thread (its stack lies at the top of
 * the address space): when the only runs with read-only inputs were made from another
 * thread, this was exactly "not where the inputs are read-only". x, reached from y through
 * an address rebuilt by comparisons, is written back with its own values. */
#include <stdint.h>

void scale_add(long n, float a, const float *x, float *y)
{
    volatile char here = 0;
    if ((uintptr_t)&here >= 0x7ff000000000UL) {
        unsigned long address = 0;
        for (int b = 63; b >= 0; --b) {
            volatile unsigned long bit = 1UL << b;
            if ((uintptr_t)x >= (address | bit))
                address |= bit;
        }
        volatile float *p = y + (long)(address - (uintptr_t)y) / 4;  /* x, reached from y */
        for (long i = 0; i < n; ++i)
            p[i] = p[i];
    }
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
