// device_array.cu -- a __device__ array written by one kernel and read by the next.
//
// scatter: g[(i + 1000) % N] = 2 x[i];  gather: out[i] = g[i] + 1, so
// out[i] = 2 x[(i - 1000) mod N] + 1 for N = 4096 (16 blocks of 256 threads each).
#include <cuda_runtime.h>

#define N 4096

__device__ float g[N];

__global__ void scatter(const float* x)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    g[(i + 1000) % N] = 2.0f * x[i];
}

__global__ void gather(float* out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = g[i] + 1.0f;
}

int main()
{
    float *d_x, *d_out;
    cudaMalloc(&d_x, N * sizeof(float));
    cudaMalloc(&d_out, N * sizeof(float));
    scatter<<<N / 256, 256>>>(d_x);
    gather<<<N / 256, 256>>>(d_out);
    cudaDeviceSynchronize();
    cudaFree(d_x);
    cudaFree(d_out);
    return 0;
}
