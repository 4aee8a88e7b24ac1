// huge_launch.cu -- a launch of 2^31 - 1 blocks of 256 threads (about 5.5e11 threads): hours on
// the CPU executor. Each thread of block 0 writes out[threadIdx.x] = threadIdx.x; no other
// block writes anything.
#include <cuda_runtime.h>

__global__ void tiny(int* out)
{
    if (blockIdx.x == 0)
        out[threadIdx.x] = threadIdx.x;
}

int main()
{
    int* d_out;
    cudaMalloc(&d_out, 256 * sizeof(int));
    tiny<<<2147483647, 256>>>(d_out);
    cudaDeviceSynchronize();
    cudaFree(d_out);
    return 0;
}
