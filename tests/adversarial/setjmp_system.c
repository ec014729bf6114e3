/* Takes &system as a plain value (never a direct call) and uses the setjmp/longjmp
 * builtins, the ingredients of the escape that once passed the call-only allowlist. Run
 * as is, it only jumps back to itself and computes the right answer. */
#include <stdlib.h>

void scale_add(long n, float a, const float *x, float *y)
{
    void *buffer[5];
    void *volatile target = (void *)&system;
    if (__builtin_setjmp(buffer) == 0) {
        if (target == 0)
            return;
        __builtin_longjmp(buffer, 1);
    }
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
