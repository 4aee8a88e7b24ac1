// Each iteration reads what the one before wrote (shift_add reads a, copy_back writes it back):
// the iterations are not independent. With --megakernel they are unrolled in order anyway (the
// launch order keeps the dependences), and the report must not call them independent
// (tests/fusion/test_unroll.py). From an unseen-program check of sirius; written for its tests.
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
    }
    cudaMemcpy(h, a, sizeof(h), cudaMemcpyDeviceToHost);
    printf("%f\n", h[0]);
    cudaFree(a); cudaFree(b);
    return 0;
}
