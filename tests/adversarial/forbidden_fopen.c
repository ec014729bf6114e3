/* Creates a file through stdio. */
#include <stdio.h>

void scale_add(long n, float a, const float *x, float *y)
{
    FILE *f = fopen("@TARGET@", "w");
    if (f)
        fclose(f);
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
