// race_blocks.cu -- PLANTED BUG: an inter-block race within one launch.
//
// produce_consume runs 2 blocks of 64 threads. Block 0 (the producer) writes data[t] = t + 1000;
// block 1 (the consumer) copies data[t] into out[t] in the SAME launch. No GPU orders blocks, so
// out[t] is the producer's value if block 0 happens to run first and the old data[t] otherwise.
#include <cuda_runtime.h>

#define BLOCK 64

__global__ void produce_consume(int* data, int* out)
{
    int t = threadIdx.x;
    if (blockIdx.x == 0)
        data[t] = t + 1000;
    else
        out[t] = data[t];
}

int main()
{
    int *d_data, *d_out;
    cudaMalloc(&d_data, BLOCK * sizeof(int));
    cudaMalloc(&d_out, BLOCK * sizeof(int));
    produce_consume<<<2, BLOCK>>>(d_data, d_out);
    cudaDeviceSynchronize();
    cudaFree(d_data);
    cudaFree(d_out);
    return 0;
}
