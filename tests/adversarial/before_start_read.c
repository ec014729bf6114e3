/* Reads the element before x once (its value unused): harmless on any buffer with memory
 * below it, a fault on one that starts a mapping (np.memmap of a raw file). */
void scale_add(long n, float a, const float *x, float *y)
{
    if (n > 0)
        (void)((const volatile float *)x)[-1];
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
