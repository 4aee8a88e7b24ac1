// race_threads.cu -- PLANTED BUG: a missing __syncthreads between a shared store and the load
// of a neighbour's element.
//
// One block of 64 threads. Thread 0 sets every s[k] = -1, a barrier, then thread t stores
// s[t] = t and (no barrier!) reads s[(t + 1) % 64] into out[t]. Whether it sees t + 1 or -1
// depends on whether thread t + 1 has run its store yet.
#include <cuda_runtime.h>

#define BLOCK 64

__global__ void neighbour(int* out)
{
    __shared__ int s[BLOCK];
    int t = threadIdx.x;
    if (t == 0)
        for (int k = 0; k < BLOCK; ++k)
            s[k] = -1;
    __syncthreads();
    s[t] = t;
    out[t] = s[(t + 1) % BLOCK];
}

int main()
{
    int* d_out;
    cudaMalloc(&d_out, BLOCK * sizeof(int));
    neighbour<<<1, BLOCK>>>(d_out);
    cudaDeviceSynchronize();
    cudaFree(d_out);
    return 0;
}
