/* Base kernel: out[i] = 1 where x[i] is not zero, else 0. A denormal is not zero, except in
 * a process that treats denormals as zero (DAZ, which -ffast-math sets): the original's own
 * outputs depend on the caller's floating-point mode. */
void nonzero(long n, const float *x, int *out)
{
    for (long i = 0; i < n; ++i)
        out[i] = x[i] != 0.0f;
}
