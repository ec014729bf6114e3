/* Right for the first 100 calls, then wrong: hidden state in a static counter. */
void scale_add(long n, float a, const float *x, float *y)
{
    static long calls;
    float bias = ++calls > 100 ? 0.5f : 0.0f;
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f + bias;
}
