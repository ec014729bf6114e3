/* device_functions.h for device code under pytest-r3: what it gives kernels (qualifiers,
 * threadIdx, vector types, atomics, math) is already in r3_cuda.h; host API functions
 * (cudaMalloc...) do not exist in a device-only build. */
#ifndef R3_FORWARD_DEVICE_FUNCTIONS_H
#define R3_FORWARD_DEVICE_FUNCTIONS_H
#endif
