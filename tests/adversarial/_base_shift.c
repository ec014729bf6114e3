/* Base kernel: dst[i] = src[i], a forward copy; recorded as the in-place shift its callers
 * use, shift(n, buf + 1, buf): the two arguments overlap partly. */
void shift(long n, const float *src, float *dst)
{
    for (long i = 0; i < n; ++i)
        dst[i] = src[i];
}
