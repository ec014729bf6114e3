/* <cooperative_groups/reduce.h>: cg::reduce is in pytest-r3's <cooperative_groups.h> */
#include "../cooperative_groups.h"
