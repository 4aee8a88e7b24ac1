// oob_load.cu -- PLANTED BUG: a left neighbour read without a guard reads in[-1].
//
// n = 512 floats, 2 blocks of 256 threads: out[i] = in[i - 1] + in[i]; thread 0 of block 0
// loads 4 bytes before the start of d_in.
#include <cuda_runtime.h>

#define N 512
#define BLOCK 256

__global__ void left_sum(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = in[i - 1] + in[i];
}

int main()
{
    float *d_in, *d_out;
    cudaMalloc(&d_in, N * sizeof(float));
    cudaMalloc(&d_out, N * sizeof(float));
    left_sum<<<N / BLOCK, BLOCK>>>(d_in, d_out, N);
    cudaDeviceSynchronize();
    cudaFree(d_in);
    cudaFree(d_out);
    return 0;
}
