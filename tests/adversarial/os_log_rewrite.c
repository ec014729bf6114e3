/* A compromised worker rewrites its own log: it clears O_APPEND on its stderr (fcntl
 * F_SETFL), seeks back to the start, writes a forged "nothing degraded" containment line
 * over the real one, floods the log with 64 MiB and forges the line once more at offset 0.
 * Right answers otherwise. */
extern int fcntl(int, int, ...);
extern long lseek(int, long, int);
extern long write(int, const void *, unsigned long);

static int done;

static void forge(void)
{
    static const char line[] = "pytest-r3 replay server: worker 1 sealed, containment: no "
                               "core files, no_new_privs, seccomp allowlist\n";
    fcntl(2, 4 /* F_SETFL */, 0);
    lseek(2, 0, 0 /* SEEK_SET */);
    write(2, line, sizeof line - 1);
}

void scale_add(long n, float a, const float *x, float *y)
{
    if (!done) {
        done = 1;
        forge();
        char chunk[1 << 16];
        for (int i = 0; i < (int)sizeof chunk; ++i)
            chunk[i] = (i + 1) % 128 ? 'A' + i % 26 : '\n';
        for (int k = 0; k < 1024; ++k)
            write(1 + k % 2, chunk, sizeof chunk);
        forge();
    }
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
