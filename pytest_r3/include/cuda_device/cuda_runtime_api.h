/* pytest-r3: <cuda_runtime_api.h> for device-only compilation. pytest-r3 compiles only the
 * device side of a .cu file; the host code it keeps is parsed, never built, and finds the
 * names it uses declared in host_only/r3_cuda_runtime_api.h (nothing there is defined). */
#ifndef R3_CUDA_STUB_RUNTIME_API_H
#define R3_CUDA_STUB_RUNTIME_API_H
#include <r3_cuda.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <r3_cuda_runtime_api.h>
#endif
