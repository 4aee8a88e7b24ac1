// warp_lane_order.cu -- PLANTED RACE: shows the order in which the lanes of a warp run between
// shuffles. Each lane writes its lane id to one shared slot per step (no barrier, no
// __syncwarp: the last writer wins) and reads it back after the next shuffle, so the output
// records, per warp and step, which lane the executor ran last. The shuffles have constant
// operands (the block loop completes them itself, entries.block_wrapper): a test compares
// that with the runtime completing every one, in the random order, where the lanes' order is
// drawn anew at each step.
#include <cuda_runtime.h>

#define BLOCK 128
#define STEPS 5

__global__ void lane_order(int* out)
{
    __shared__ int slots[BLOCK / 32];
    volatile int* last = slots;  // each access really goes to memory
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int v = threadIdx.x;
    int* o = out + (blockIdx.x * BLOCK + threadIdx.x) * (STEPS + 1);
#define STEP(s, b)                                                                             \
    last[warp] = lane;                                                                         \
    v += __shfl_down_sync(0xffffffffu, v, b);                                                  \
    o[s] = last[warp];
    STEP(0, 16) STEP(1, 8) STEP(2, 4) STEP(3, 2) STEP(4, 1)
    o[STEPS] = v;
}

int main()
{
    int* d_out;
    cudaMalloc(&d_out, 4 * BLOCK * (STEPS + 1) * sizeof(int));
    lane_order<<<4, BLOCK>>>(d_out);
    cudaDeviceSynchronize();
    cudaFree(d_out);
    return 0;
}
