// Bad input: an #include of a header that does not exist. clang stops with a fatal error
// ("'no_such_header.h' file not found") on the line marked OFFENDING.
#include <cuda_runtime.h>
#include "no_such_header.h"  // OFFENDING

__global__ void scale(float *x, float a) { x[threadIdx.x] *= a; }

int main() {
    float *d_x;
    cudaMalloc(&d_x, 32 * sizeof(float));
    scale<<<1, 32>>>(d_x, 2.0f);
    cudaFree(d_x);
    return 0;
}
