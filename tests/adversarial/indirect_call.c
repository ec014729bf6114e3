/* A call through a function pointer the optimiser cannot see through. */
static float affine(float a, float v) { return a * v + 1.0f; }

void scale_add(long n, float a, const float *x, float *y)
{
    float (*volatile op)(float, float) = affine;
    for (long i = 0; i < n; ++i)
        y[i] = op(a, x[i]);
}
