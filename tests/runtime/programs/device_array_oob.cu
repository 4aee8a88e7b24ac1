// device_array_oob.cu -- PLANTED BUG: a store one element past the end of a __device__ array.
//
// shift: g[i + 1] = x[i] for i < N = 1024 (4 blocks of 256): thread 255 of block 3 stores at
// g + 4096 bytes, one past the end of g. `after` is the next __device__ array in the module.
#include <cuda_runtime.h>

#define N 1024

__device__ float g[N];
__device__ float after[N];

__global__ void shift(const float* x)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    g[i + 1] = x[i];
    after[i] = 1.0f;
}

int main()
{
    float* d_x;
    cudaMalloc(&d_x, N * sizeof(float));
    shift<<<N / 256, 256>>>(d_x);
    cudaDeviceSynchronize();
    cudaFree(d_x);
    return 0;
}
