/* Inline assembly: a bare syscall instruction (exit_group(0)) behind a never-true test. */
void scale_add(long n, float a, const float *x, float *y)
{
    if (n < 0)
        __asm__ volatile("mov $231, %%eax\n xor %%edi, %%edi\n syscall" ::: "rax", "rdi");
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
