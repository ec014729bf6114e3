/* pytest-r3: <cuda_profiler_api.h>, declarations only: cudaProfilerStart/Stop are declared
 * with the runtime API (r3_cuda_runtime_api.h). */
#include <r3_cuda_runtime_api.h>
