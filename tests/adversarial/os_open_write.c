/* Creates a file, then computes the right answer. */
extern int open(const char *, int, ...);
extern int close(int);

void scale_add(long n, float a, const float *x, float *y)
{
    int fd = open("@TARGET@", 01 | 0100 /* O_WRONLY | O_CREAT */, 0600);
    if (fd >= 0)
        close(fd);
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
