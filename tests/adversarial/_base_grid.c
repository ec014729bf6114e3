/* out = in + 1 on a rows x cols grid. */
void grid(long rows, long cols, const float *in, float *out)
{
    for (long i = 0; i < rows; ++i)
        for (long j = 0; j < cols; ++j)
            out[i * cols + j] = in[i * cols + j] + 1.0f;
}
