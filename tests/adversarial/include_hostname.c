/* Includes a local file by absolute path: its text would show in clang's diagnostics. */
#include "/etc/hostname"

void scale_add(long n, float a, const float *x, float *y)
{
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
