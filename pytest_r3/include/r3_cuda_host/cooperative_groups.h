/* <cooperative_groups.h> for CUDA emulation: the same subset as the device build's, over
 * r3_cuda_host.h's warp and block functions */
#include "../cuda_device/cooperative_groups.h"
