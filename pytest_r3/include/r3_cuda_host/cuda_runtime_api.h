/* <cuda_runtime_api.h> for CUDA emulation: r3_cuda_host.h, included in front of every kernel, already
 * provides what device code uses from it; host code finds the runtime API declared (never
 * defined: the host code a kernel does not reach is set aside before the build) */
#include <r3_cuda_runtime_api.h>
