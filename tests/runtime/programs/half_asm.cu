// half_asm.cu -- inline PTX assembly the CPU executor does not lift.
//
// scale_f32 is plain C++ and runs; half_axpy (y = 2x + y in __half: cuda_fp16.hpp's asm, which
// is lifted, plus a `pmevent`, which is not) must be rejected by the CPU executor with a message
// naming it and the template. n = 256, 2 blocks of 128.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define N 256
#define BLOCK 128

__global__ void scale_f32(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = 3.0f * x[i];
}

__global__ void half_axpy(const __half* x, __half* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)  // pmevent: a PTX instruction not in the executor's lifting table
        { asm volatile("pmevent 1;"); y[i] = __hadd(__hmul(__float2half(2.0f), x[i]), y[i]); }
}

int main()
{
    float *d_x, *d_y;
    __half *d_hx, *d_hy;
    cudaMalloc(&d_x, N * sizeof(float));
    cudaMalloc(&d_y, N * sizeof(float));
    cudaMalloc(&d_hx, N * sizeof(__half));
    cudaMalloc(&d_hy, N * sizeof(__half));
    scale_f32<<<N / BLOCK, BLOCK>>>(d_x, d_y, N);
    half_axpy<<<N / BLOCK, BLOCK>>>(d_hx, d_hy, N);
    cudaDeviceSynchronize();
    cudaFree(d_x);
    cudaFree(d_y);
    cudaFree(d_hx);
    cudaFree(d_hy);
    return 0;
}
