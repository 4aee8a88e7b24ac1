// Bad input: a device allocation whose size comes from the command line. clang compiles it;
// host analysis must reject the cudaMalloc on the line marked OFFENDING, because its size is not
// a compile-time constant (sirius models buffers of known size).
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void scale(float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= 2.0f;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1024;
    float *d_x;
    cudaMalloc(&d_x, n * sizeof(float));  // OFFENDING
    scale<<<(n + 255) / 256, 256>>>(d_x, n);
    cudaDeviceSynchronize();
    cudaFree(d_x);
    return 0;
}
