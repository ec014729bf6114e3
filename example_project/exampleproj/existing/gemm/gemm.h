/* Problem sizes and the element type of gemm.c, chosen with -D flags. */
#ifndef EXISTING_GEMM_H
#define EXISTING_GEMM_H

#if !defined(MINI_DATASET) && !defined(SMALL_DATASET) && !defined(LARGE_DATASET)
# define SMALL_DATASET
#endif
#ifdef MINI_DATASET
# define NI 20
# define NJ 25
# define NK 30
#endif
#ifdef SMALL_DATASET
# define NI 60
# define NJ 70
# define NK 80
#endif
#ifdef LARGE_DATASET
# define NI 1000
# define NJ 1100
# define NK 1200
#endif

#if !defined(DATA_TYPE_IS_INT) && !defined(DATA_TYPE_IS_FLOAT) && !defined(DATA_TYPE_IS_DOUBLE)
# define DATA_TYPE_IS_DOUBLE
#endif
#ifdef DATA_TYPE_IS_INT
# define DATA_TYPE int
# define DATA_PRINTF_MODIFIER "%d "
#endif
#ifdef DATA_TYPE_IS_FLOAT
# define DATA_TYPE float
# define DATA_PRINTF_MODIFIER "%0.2f "
#endif
#ifdef DATA_TYPE_IS_DOUBLE
# define DATA_TYPE double
# define DATA_PRINTF_MODIFIER "%0.2lf "
#endif

#endif
