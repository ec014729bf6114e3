/* Adds a carry that is never initialised before its first use; clang -O3 folds the
 * undefined value so this build happens to be right. */
void scale_add(long n, float a, const float *x, float *y)
{
    float carry;
    for (long i = 0; i < n; ++i) {
        y[i] = a * x[i] + 1.0f + carry;
        carry = 0.0f;
    }
}
