// Bad input: unified (managed) memory. clang compiles it; host analysis must reject the
// cudaMallocManaged on the line marked OFFENDING: host and device share the buffer without
// copies, which the host model cannot represent.
#include <cuda_runtime.h>

__global__ void scale(float *x) { x[threadIdx.x] *= 2.0f; }

int main() {
    float *x;
    cudaMallocManaged(&x, 32 * sizeof(float));  // OFFENDING
    for (int i = 0; i < 32; ++i) x[i] = i;
    scale<<<1, 32>>>(x);
    cudaDeviceSynchronize();
    cudaFree(x);
    return 0;
}
