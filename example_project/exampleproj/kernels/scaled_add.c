/* y[i] = alpha * x[i] + y[i]: memory-bound, one multiply-add per 12 bytes moved. */
#include "pragmas.h"

/* 0 leaves the choice to the compiler. */
#ifndef UNROLL
#define UNROLL 0
#endif
#ifndef VECTOR_WIDTH
#define VECTOR_WIDTH 0
#endif

void scaled_add(long n, float alpha, const float *x, float *y)
{
#if VECTOR_WIDTH > 0
    R3_VECTORIZE(VECTOR_WIDTH)
#endif
#if UNROLL > 0
    R3_UNROLL(UNROLL)
#endif
    for (long i = 0; i < n; ++i)
        y[i] = alpha * x[i] + y[i];
}
