/* Base kernel: inclusive prefix sum of ints (integer data only). */
void prefix_sum(long n, const int *x, int *out)
{
    int s = 0;
    for (long i = 0; i < n; ++i) {
        s += x[i];
        out[i] = s;
    }
}
