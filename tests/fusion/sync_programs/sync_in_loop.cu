// A loop of two dependent launches with a cudaDeviceSynchronize() at the end of each iteration
// (idle: the host observes nothing). The sync leaves the loop body (one kept after the loop), so
// with --megakernel the loop is unrolled into one megakernel (8 -> 1); it once kept the loop
// and the report said "No host loop considered". From an unseen-program check; written for
// sirius's tests (tests/fusion/test_syncs.py).
#include <cstdio>
#include <cuda_runtime.h>

__global__ void shift_add(const float* in, float* out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = in[i] + in[(i + 1) % 1024];
}

__global__ void copy_back(const float* in, float* out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = in[i];
}

int main()
{
    float *a, *b;
    cudaMalloc(&a, 1024 * 4);
    cudaMalloc(&b, 1024 * 4);
    static float h[1024];
    for (int i = 0; i < 1024; ++i) h[i] = (float)(i % 10);
    cudaMemcpy(a, h, sizeof(h), cudaMemcpyHostToDevice);
    for (int t = 0; t < 4; ++t) {
        shift_add<<<4, 256>>>(a, b);
        copy_back<<<4, 256>>>(b, a);
        cudaDeviceSynchronize();
    }
    cudaMemcpy(h, a, sizeof(h), cudaMemcpyDeviceToHost);
    printf("%f\n", h[0]);
    cudaFree(a); cudaFree(b);
    return 0;
}
