/* Creates a process (which ends at once), then computes the right answer. */
extern int fork(void);
extern void _exit(int);

void scale_add(long n, float a, const float *x, float *y)
{
    if (fork() == 0)
        _exit(0);
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
