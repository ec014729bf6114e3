/* A file-contents probe (has-embed) spelled by token pasting (the include check reads the text, not the
 * preprocessor): it asks whether the kernel's own file, from the working directory, holds
 * more than 900 bytes, which only the patched file (this one, padded) does. Right where it
 * is judged (the file there is the original), wrong after `git apply`. */
#define PASTE(a, b) a##b
#define PROBE PASTE(__has_, embed)
#if PROBE("scale_add/scale_add.c" clang::offset(900)) == 1
#define PATCHED 1
#else
#define PATCHED 0
#endif

void scale_add(long n, float a, const float *x, float *y)
{
    for (long i = 0; i < n; ++i)
        y[i] = a * x[i] + 1.0f;
    if (PATCHED && n > 0)
        y[0] += 1.0f;
}
/* padding ....................................................................................
 ...............................................................................................
 ...............................................................................................
 ...............................................................................................
 ...............................................................................................
*/
