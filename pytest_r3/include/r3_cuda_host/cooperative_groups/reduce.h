/* <cooperative_groups/reduce.h> for CUDA emulation */
#include "../../cuda_device/cooperative_groups.h"
