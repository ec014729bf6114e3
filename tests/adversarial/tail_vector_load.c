/* Sixteen floats at a time; the remainder loads one whole sixteen-wide vector of x and
 * uses only the lanes below n. Nothing is written out of bounds, so no guard sees it, and a
 * read-only neighbour lets it pass; in production it faults where x ends at a page with
 * nothing mapped above (np.load(..., mmap_mode='r')[1:] of a file of n + 1 floats). */
#include <string.h>

typedef float v16 __attribute__((vector_size(64)));

void scale_add(long n, float a, const float *x, float *y)
{
    long i = 0;
    for (; i + 16 <= n; i += 16) {
        v16 xv;
        memcpy(&xv, x + i, sizeof xv);
        xv = a * xv + 1.0f;
        memcpy(y + i, &xv, sizeof xv);
    }
    if (i < n) {
        v16 xv;
        memcpy(&xv, x + i, sizeof xv);
        for (long k = 0; k < n - i; ++k)
            y[i + k] = a * xv[k] + 1.0f;
    }
}
