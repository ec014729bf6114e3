/* y = a * x + y over n floats. Each thread updates ITEMS elements, one block-width apart,
 * so consecutive threads touch consecutive elements (coalesced) whatever ITEMS is. No
 * extern "C": pytest-r3 finds the C++-mangled kernel by its name. */
#ifndef ITEMS
#define ITEMS 1
#endif

__global__ void saxpy(int n, float a, const float *x, float *y)
{
    int first = blockIdx.x * blockDim.x * ITEMS + threadIdx.x;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        int i = first + k * blockDim.x;
        if (i < n)
            y[i] = a * x[i] + y[i];
    }
}
