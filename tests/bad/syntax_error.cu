// Bad input: a C++ syntax error. clang rejects the file ("expected ';' after expression"),
// so sirius must say it "cannot compile" it and point at the line marked OFFENDING.
#include <cuda_runtime.h>

__global__ void scale(float *x, float a) {
    x[threadIdx.x] *= a  // OFFENDING: missing ';'
}

int main() {
    float *d_x;
    cudaMalloc(&d_x, 32 * sizeof(float));
    scale<<<1, 32>>>(d_x, 2.0f);
    cudaFree(d_x);
    return 0;
}
