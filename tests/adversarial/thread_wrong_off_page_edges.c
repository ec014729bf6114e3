/* thread_stack_wrong.c, wrong only where neither buffer starts or ends within 16 bytes of a
 * page edge: when the only runs off the main thread had every buffer at a page edge, it was
 * never wrong where it was judged, and wrong on every call from a user's thread pool. */
#include <stdint.h>

static int at_page_edge(uintptr_t p, unsigned long bytes)
{
    return (p & 4095UL) < 16UL || ((0UL - (p + bytes)) & 4095UL) < 16UL;
}

void scale_add(long n, float a, const float *x, float *y)
{
    volatile char here = 0;
    unsigned long bytes = 4UL * (unsigned long)(n > 0 ? n : 0);
    long m = n;
    if (n > 1 && (uintptr_t)&here < 0x7ff000000000UL && !at_page_edge((uintptr_t)x, bytes)
        && !at_page_edge((uintptr_t)y, bytes))
        m = n - 1;
    for (long i = 0; i < m; ++i)
        y[i] = a * x[i] + 1.0f;
}
