/* r3_hip_names.h: HIP's own spellings of the thread and block built-ins (hipThreadIdx_x...),
 * shared by the AMDGCN device build (r3_hip.h) and HIP emulation on the CPU
 * (r3_hip_host.h), which both define threadIdx and friends first. */
#ifndef R3_HIP_NAMES_H
#define R3_HIP_NAMES_H
#define hipThreadIdx_x (threadIdx.x)
#define hipThreadIdx_y (threadIdx.y)
#define hipThreadIdx_z (threadIdx.z)
#define hipBlockIdx_x (blockIdx.x)
#define hipBlockIdx_y (blockIdx.y)
#define hipBlockIdx_z (blockIdx.z)
#define hipBlockDim_x (blockDim.x)
#define hipBlockDim_y (blockDim.y)
#define hipBlockDim_z (blockDim.z)
#define hipGridDim_x (gridDim.x)
#define hipGridDim_y (gridDim.y)
#define hipGridDim_z (gridDim.z)
#endif
