/* Reads its own frame address (the way to find and rewrite a return address). */
void scale_add(long n, float a, const float *x, float *y)
{
    void *volatile frame = __builtin_frame_address(0);
    (void)frame;
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
