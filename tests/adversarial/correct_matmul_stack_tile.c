/* A fixed 8 KiB stack tile of b's rows (32 x 32 doubles): bounded stack use, still kept. */
void matmul(int n, const double *a, const double *b, double *c)
{
    double tile[32 * 32];
    for (int i = 0; i < n * n; ++i)
        c[i] = 0.0;
    for (int k0 = 0; k0 < n; k0 += 32) {
        int k1 = k0 + 32 < n ? k0 + 32 : n;
        for (int j0 = 0; j0 < n; j0 += 32) {
            int j1 = j0 + 32 < n ? j0 + 32 : n;
            for (int k = k0; k < k1; ++k)
                for (int j = j0; j < j1; ++j)
                    tile[(k - k0) * 32 + (j - j0)] = b[k * n + j];
            for (int i = 0; i < n; ++i)
                for (int k = k0; k < k1; ++k)
                    for (int j = j0; j < j1; ++j)
                        c[i * n + j] += a[i * n + k] * tile[(k - k0) * 32 + (j - j0)];
        }
    }
}
