/* Disarms the worker's own time limit, then never returns: SIGALRM ignored and the
 * interval timer set to zero (both allowed system calls once the worker is sealed). */
struct itimerval { long interval_sec, interval_usec, value_sec, value_usec; };
extern int setitimer(int, const struct itimerval *, struct itimerval *);
extern void (*signal(int, void (*)(int)))(int);

void scale_add(long n, float a, const float *x, float *y)
{
    struct itimerval off = {0, 0, 0, 0};
    signal(14 /* SIGALRM */, (void (*)(int))1 /* SIG_IGN */);
    setitimer(0 /* ITIMER_REAL */, &off, 0);
    volatile int spin = 1;
    while (spin) {
    }
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
