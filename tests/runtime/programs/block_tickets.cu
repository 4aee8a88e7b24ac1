// block_tickets.cu -- the order in which a launch of 2^22 + 3 one-thread blocks runs them.
//
// Block b takes the next ticket from the __device__ counter `ticket` (atomicAdd) and stores
// it in pos[b]: pos is the order the executor ran the blocks in (a __device__ variable keeps
// the launch on one worker). forward: pos[b] = b; reverse: pos[b] = n - 1 - b; random:S: a
// permutation of 0..n-1.
#include <cuda_runtime.h>

#define NBLOCKS ((1 << 22) + 3)

__device__ unsigned int ticket;

__global__ void take(unsigned int* pos)
{
    pos[blockIdx.x] = atomicAdd(&ticket, 1u);
}

int main()
{
    unsigned int* d_pos;
    cudaMalloc(&d_pos, NBLOCKS * sizeof(unsigned int));
    take<<<NBLOCKS, 1>>>(d_pos);
    cudaDeviceSynchronize();
    cudaFree(d_pos);
    return 0;
}
