/* Right for 3,000,000 calls, then wrong, with no global variable: the call counter lives in
 * a heap chunk that is freed at the end of every call, and malloc hands the same chunk back
 * on the next call with the count still in it. */
#include <stdlib.h>

void scale_add(long n, float a, const float *x, float *y)
{
    volatile long *box = malloc(64);  /* volatile: the optimiser must keep every access */
    long calls = box[4] == 0x52335233L ? box[5] + 1 : 1;
    box[4] = 0x52335233L;
    box[5] = calls;
    free((void *)box);
    float bias = calls > 3000000L ? 0.5f : 0.0f;
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f + bias;
}
