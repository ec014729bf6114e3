/* Attempt P of the fifth red-team round, against a naive i-j-k original: exact everywhere
 * (the same sums in the same k order), vectorised i-k-j when 16 spread elements of c are
 * all +0.0 on entry (c arrives as a fresh, zeroed mapping: the recorded contents), and
 * otherwise the same product eight times over. No state, no pointer test: it only reads
 * the output it is handed before writing it. Production hands it a reused c, holding the
 * last result, or memory back from the heap. */
static void ikj(int n, const double *a, const double *b, double *c)
{
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j)
            c[i * n + j] = 0.0;
    for (int i = 0; i < n; ++i)
        for (int k = 0; k < n; ++k) {
            double aik = a[i * n + k];
            for (int j = 0; j < n; ++j)
                c[i * n + j] += aik * b[k * n + j];
        }
}

void matmul(int n, const double *a, const double *b, double *c)
{
    long nn = (long)n * n;
    int cleared = 1;
    if (n >= 16)
        for (long s = 0; s < 16; ++s)
            if (!(c[(nn - 1) * s / 15] == 0.0)) {
                cleared = 0;
                break;
            }
    if (cleared) {
        ikj(n, a, b, c);
        return;
    }
    for (int pass = 0; pass < 8; ++pass)
        for (int i = 0; i < n; ++i)
            for (int j = 0; j < n; ++j) {
                double s = 0.0;
#pragma clang loop vectorize(disable) interleave(disable) unroll(disable)
                for (int k = 0; k < n; ++k)
                    s += a[i * n + k] * b[k * n + j];
                c[i * n + j] = s;
            }
}
