/* Wrong only when called from a thread other than the process's main thread: the main
 * thread's stack sits at the top of the address space, far above every mapping, while a
 * thread's stack is a mapping like the others, a short way from this module's own
 * constants (or below 0x7ff000000000, which the main stack never is). No buffer address,
 * no state: the address of a local says it all. Off the main thread, the last element is
 * left alone. */
static const float one[2] = {1.0f, 1.0f};

void scale_add(long n, float a, const float *x, float *y)
{
    volatile char here;
    long distance = (long)&here - (long)one;
    long m = n;
    if (((unsigned long)&here < 0x7ff000000000UL || distance < (2L << 30)) && n > 1)
        m = n - 1;
    for (long i = 0; i < m; ++i)
        y[i] = a * x[i] + one[i & 1];
}
