/* <cuda_runtime_api.h> for CUDA emulation: r3_cuda_host.h, included in front of every kernel, already
 * provides what device code uses from it */
