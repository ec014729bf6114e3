/* Correct: eight outputs at a time through a helper taking 32-byte vectors. Built for a
 * plain x86-64 CPU (no AVX) the helper's vectors are passed in memory rather than in
 * registers: other IR, the same results, and no target macro: portable. */
typedef float f8 __attribute__((vector_size(32)));
static f8 axpy8(f8 a, f8 x) { return a * x + 1.0f; }
void scale_add(long n, float a, const float *x, float *y)
{
    long i = 0;
    f8 av = {a, a, a, a, a, a, a, a};
    for (; i + 8 <= n; i += 8) {
        f8 xv;
        __builtin_memcpy(&xv, x + i, sizeof xv);
        f8 r = axpy8(av, xv);
        __builtin_memcpy(y + i, &r, sizeof r);
    }
    for (; i < n; ++i) y[i] = a * x[i] + 1.0f;
}
