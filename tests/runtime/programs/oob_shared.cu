// oob_shared.cu -- PLANTED BUG: a right neighbour read from a shared tile without a guard.
//
// 2 blocks of 128 threads stage in[] in a 128-float __shared__ tile; thread t then reads
// tile[t] and tile[t + 1], so thread 127 of each block reads one float past the tile, the
// end of the block's static shared memory (512 bytes).
#include <cuda_runtime.h>

#define N 256
#define BLOCK 128

__global__ void right_sum(const float* in, float* out)
{
    __shared__ float tile[BLOCK];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = in[i];
    __syncthreads();
    out[i] = tile[threadIdx.x] + tile[threadIdx.x + 1];
}

int main()
{
    float *d_in, *d_out;
    cudaMalloc(&d_in, N * sizeof(float));
    cudaMalloc(&d_out, N * sizeof(float));
    right_sum<<<N / BLOCK, BLOCK>>>(d_in, d_out);
    cudaDeviceSynchronize();
    cudaFree(d_in);
    cudaFree(d_out);
    return 0;
}
