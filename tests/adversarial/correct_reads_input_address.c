/* Correct: tests the read-only input's alignment ((uintptr_t)x & 15) to pick one of two
 * loops that compute the same thing. Reading an address is not writing through it: the
 * user's launcher keeps x read-only, so the signature is the original's. */
#include <stdint.h>

void scale_add(long n, float a, const float *x, float *y)
{
    if (((uintptr_t)x & 15) == 0) {
        for (long i = 0; i < n; ++i)
            y[i] = a * x[i] + 1.0f;
    } else {
#pragma clang loop vectorize(disable)
        for (long i = 0; i < n; ++i)
            y[i] = a * x[i] + 1.0f;
    }
}
