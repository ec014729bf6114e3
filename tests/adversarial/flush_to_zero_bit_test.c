/* Exact in the default floating-point mode: a float is nonzero when any bit but its sign is
 * set. In a process that treats denormals as zero (DAZ, set by a library built with
 * -ffast-math) the original counts a denormal as zero and this does not: after the patch,
 * such a process gets other answers. */
#include <string.h>

void nonzero(long n, const float *x, int *out)
{
    for (long i = 0; i < n; ++i) {
        unsigned bits;
        memcpy(&bits, &x[i], sizeof bits);
        out[i] = (bits << 1) != 0;
    }
}
