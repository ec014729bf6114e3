/* Opens an IPv4 socket (and closes it), then computes the right answer. */
extern int socket(int, int, int);
extern int close(int);

void scale_add(long n, float a, const float *x, float *y)
{
    int fd = socket(2 /* AF_INET */, 1 /* SOCK_STREAM */, 0);
    if (fd >= 0)
        close(fd);
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
