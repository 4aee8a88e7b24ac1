// divergent_barrier.cu -- PLANTED BUG: __syncthreads() under a condition only some threads meet.
//
// 2 blocks of 64 threads; only threads 0..15 reach the barrier, the other 48 run past it and
// exit. On a GPU this is undefined (a hang or garbage); the CPU executor must report it.
#include <cuda_runtime.h>

#define BLOCK 64

__global__ void half_barrier(float* x)
{
    __shared__ float s[BLOCK];
    int t = threadIdx.x;
    int i = blockIdx.x * BLOCK + t;
    s[t] = x[i];
    if (threadIdx.x < 16)
        __syncthreads();
    x[i] = s[BLOCK - 1 - t];
}

int main()
{
    float* d_x;
    cudaMalloc(&d_x, 2 * BLOCK * sizeof(float));
    half_barrier<<<2, BLOCK>>>(d_x);
    cudaDeviceSynchronize();
    cudaFree(d_x);
    return 0;
}
