/* Prints from the kernel (harmless, but outside the allowlist). */
#include <stdio.h>

void scale_add(long n, float a, const float *x, float *y)
{
    printf("scale_add(%ld)\n", n);
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
