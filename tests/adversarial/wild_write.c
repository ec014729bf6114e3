/* Writes far outside its buffer, into memory that is not mapped. */
void scale_add(long n, float a, const float *x, float *y)
{
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
    *(volatile float *)(y + (1L << 40)) = 0.0f;
}
