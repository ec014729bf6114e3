/* A utility header in the style of benchmark suites such as PolyBench/C: array-parameter
 * macros, the element type chosen by -D flags, and the driver's helpers (defined in a
 * separate file, polybench.c, that pytest-r3 never compiles). */
#ifndef EXISTING_POLYBENCH_H
#define EXISTING_POLYBENCH_H

#include <stdlib.h>

#ifndef POLYBENCH_PADDING_FACTOR
# define POLYBENCH_PADDING_FACTOR 0
#endif

/* C99 array parameters: C[ni][nj] with -DPOLYBENCH_USE_C99_PROTO, else C[NI][NJ] */
#ifdef POLYBENCH_USE_C99_PROTO
# define POLYBENCH_C99_SELECT(x, y) y
#else
# define POLYBENCH_C99_SELECT(x, y) x
#endif
#ifdef POLYBENCH_USE_RESTRICT
# define POLYBENCH_RESTRICT restrict
#else
# define POLYBENCH_RESTRICT
#endif
#define POLYBENCH_1D(var, dim1, ddim1) \
  var[POLYBENCH_RESTRICT POLYBENCH_C99_SELECT(dim1, ddim1) + POLYBENCH_PADDING_FACTOR]
#define POLYBENCH_2D(var, dim1, dim2, ddim1, ddim2) \
  var[POLYBENCH_RESTRICT POLYBENCH_C99_SELECT(dim1, ddim1) + POLYBENCH_PADDING_FACTOR] \
     [POLYBENCH_C99_SELECT(dim2, ddim2) + POLYBENCH_PADDING_FACTOR]

/* the driver's arrays: a pointer to a whole array, allocated by the utility library */
#define POLYBENCH_2D_ARRAY_DECL(var, type, dim1, dim2, ddim1, ddim2) \
  type (*var)[POLYBENCH_C99_SELECT(dim1, ddim1) + POLYBENCH_PADDING_FACTOR] \
             [POLYBENCH_C99_SELECT(dim2, ddim2) + POLYBENCH_PADDING_FACTOR] = \
    polybench_alloc_data((dim1 + POLYBENCH_PADDING_FACTOR) * (dim2 + POLYBENCH_PADDING_FACTOR), \
                         sizeof(type))
#define POLYBENCH_FREE_ARRAY(x) free((void *)x)

#define polybench_start_instruments polybench_timer_start()
#define polybench_stop_instruments polybench_timer_stop()
#define polybench_print_instruments polybench_timer_print()
#define polybench_prevent_dce(func) \
  if (argc > 42 && !strcmp(argv[0], "")) func

extern void *polybench_alloc_data(unsigned long long n, int elt_size);
extern void polybench_timer_start(void);
extern void polybench_timer_stop(void);
extern void polybench_timer_print(void);

#define POLYBENCH_DUMP_TARGET stderr
#define POLYBENCH_DUMP_START fprintf(POLYBENCH_DUMP_TARGET, "==BEGIN DUMP_ARRAYS==\n")
#define POLYBENCH_DUMP_FINISH fprintf(POLYBENCH_DUMP_TARGET, "==END   DUMP_ARRAYS==\n")
#define POLYBENCH_DUMP_BEGIN(s) fprintf(POLYBENCH_DUMP_TARGET, "begin dump: %s", s)
#define POLYBENCH_DUMP_END(s) fprintf(POLYBENCH_DUMP_TARGET, "\nend   dump: %s\n", s)

#endif
