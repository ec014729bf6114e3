/* Scribbles on its read-only input. */
void scale_add(long n, float a, const float *x, float *y)
{
    for (long i = 0; i < n; ++i) {
        y[i] = a * x[i] + 1.0f;
        ((float *)x)[i] = 0.0f;
    }
}
