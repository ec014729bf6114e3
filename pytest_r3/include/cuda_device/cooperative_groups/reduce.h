/* <cooperative_groups/reduce.h>: cg::reduce is in pytest-r3's <cooperative_groups.h>; the
   device build against an installed CUDA toolkit takes the toolkit's */
#if defined(R3_CUDA_TOOLKIT_HEADERS) && !defined(R3_CUDA_EMULATION)
#include_next <cooperative_groups/reduce.h>
#else
#include "../cooperative_groups.h"
#endif
