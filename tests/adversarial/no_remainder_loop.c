/* Processes n rounded down to a multiple of 8 and forgets the remainder: right on every
 * recorded size (1000, 64), wrong for any other n. */
static long calls;

long axpy_calls(void) { return calls; }

void axpy(long n, float a, const float *x, float *y)
{
    calls++;
    for (long i = 0; i < (n & ~7L); i += 8) {
        #pragma clang loop unroll(full)
        for (long j = 0; j < 8; ++j)
            y[i + j] = a * x[i + j] + y[i + j];
    }
}
