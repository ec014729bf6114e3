/* <hip/hip_runtime.h> for pytest-r3: what kernels use comes with r3_hip.h (the AMDGCN
 * build) or r3_hip_host.h (emulation), included in front of every HIP kernel; host code
 * next to the kernels finds the runtime API declared. */
#ifndef R3_HIP_RUNTIME_H
#define R3_HIP_RUNTIME_H
#include "hip_runtime_api.h"
#endif
