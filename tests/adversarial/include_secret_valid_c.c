/* Includes a local file that happens to be valid C: it compiles, so only the include
 * rule stops it (the file's text would end up in the patch's build, not in the patch). */
#include "@SECRET_C@"

void scale_add(long n, float a, const float *x, float *y)
{
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + ONE;
}
