/* Embeds a local file's bytes into the kernel with #embed. */
static const unsigned char secret[] = {
#embed "@SECRET@"
};

void scale_add(long n, float a, const float *x, float *y)
{
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f + 0.0f * secret[0];
}
