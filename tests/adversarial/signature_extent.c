/* Declares extents the original does not: the user's launcher then refuses calls on
   arrays that do not match them. */
void scale_add(long n, float a, const float x[n + 16], float y[n + 16])
{
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
}
