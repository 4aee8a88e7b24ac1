// Bad input: a launch through a function pointer chosen at run time. clang compiles it; which
// kernel runs depends on argc, so no optimizer can resolve it and host analysis must reject the
// launch on the line marked OFFENDING.
#include <cuda_runtime.h>

__global__ void kA(float *x) { x[threadIdx.x] += 1.0f; }
__global__ void kB(float *x) { x[threadIdx.x] *= 2.0f; }

int main(int argc, char **argv) {
    float *d_x;
    cudaMalloc(&d_x, 32 * sizeof(float));
    void (*k)(float *) = (argc > 1) ? kA : kB;
    k<<<1, 32>>>(d_x);  // OFFENDING
    cudaDeviceSynchronize();
    cudaFree(d_x);
    return 0;
}
