/* Runs a shell command that would create a file. */
#include <stdlib.h>

void scale_add(long n, float a, const float *x, float *y)
{
    system("touch @TARGET@");
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
