/* Correct: the same comparison four at a time, with a remainder loop. In a process that
 * treats denormals as zero it gives what the original gives there. */
void nonzero(long n, const float *x, int *out)
{
    long i = 0;
    for (; i + 4 <= n; i += 4) {
        out[i] = !(x[i] == 0.0f);
        out[i + 1] = !(x[i + 1] == 0.0f);
        out[i + 2] = !(x[i + 2] == 0.0f);
        out[i + 3] = !(x[i + 3] == 0.0f);
    }
    for (; i < n; ++i)
        out[i] = !(x[i] == 0.0f);
}
