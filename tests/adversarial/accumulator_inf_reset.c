/* Clamps an infinity already held in the accumulator y to zero and keeps NaN as it is: the
 * same on every finite y; where the original leaves y[i] infinite it writes a * x[i]. */
static long calls;

long axpy_calls(void) { return calls; }

void axpy(long n, float a, const float *x, float *y)
{
    calls++;
    for (long i = 0; i < n; ++i) {
        float old = y[i];
        int infinite = old == __builtin_inff() || old == -__builtin_inff();
        y[i] = a * x[i] + (infinite ? 0.0f : old);
    }
}
