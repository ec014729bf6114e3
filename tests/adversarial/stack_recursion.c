/* Unbounded recursion with a large frame: exhausts the stack. */
static float deeper(long depth, float v)
{
    volatile char frame[4096];
    frame[depth & 4095] = (char)v;
    return deeper(depth + 1, v + frame[0]) + 1.0f;
}

void scale_add(long n, float a, const float *x, float *y)
{
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
    if (n > 0)
        y[0] = deeper(0, y[0]);
}
