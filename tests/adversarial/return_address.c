/* Reads its return address (a pointer into the caller's code: a gadget finder's start). */
void scale_add(long n, float a, const float *x, float *y)
{
    void *volatile back = __builtin_return_address(0);
    (void)back;
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
