/* File-scope assembly defining an allowlisted name (fmaf) with a body of its own. */
__asm__(".text\n.globl fmaf\nfmaf:\n vfmadd213ss %xmm2, %xmm1, %xmm0\n ret\n");
extern float fmaf(float, float, float);

void scale_add(long n, float a, const float *x, float *y)
{
    for (long i = 0; i < n; ++i)
        y[i] = fmaf(a, x[i], 1.0f);
}
