// device_counter.cu -- module globals keep state inside one run, and only inside one run.
//
// `bump` (2 blocks of 64 threads) adds 1 to the __device__ int `counter` (initially 0) with
// atomicAdd and, in thread 0 of every block, adds 10 to `total` (initially 5; one plain
// read-modify-write per block, blocks run one after another in one worker). `report` copies
// counter, total and the __constant__ table's sum into out[0..2]: 128, 25, 36 in every run.
#include <cuda_runtime.h>

__device__ int counter;
__device__ int total = 5;
__constant__ int table[8] = {1, 2, 3, 4, 5, 6, 7, 8};

__global__ void bump(int* seen)
{
    int old = atomicAdd(&counter, 1);
    seen[blockIdx.x * blockDim.x + threadIdx.x] = old;
    if (threadIdx.x == 0)
        atomicAdd(&total, 10);
}

__global__ void report(int* out)
{
    int s = 0;
    for (int k = 0; k < 8; ++k)
        s += table[k];
    out[0] = counter;
    out[1] = total;
    out[2] = s;
}

int main()
{
    int *d_seen, *d_out;
    int h_out[3];
    cudaMalloc(&d_seen, 128 * sizeof(int));
    cudaMalloc(&d_out, 3 * sizeof(int));
    bump<<<2, 64>>>(d_seen);
    report<<<1, 1>>>(d_out);
    cudaMemcpy(h_out, d_out, sizeof h_out, cudaMemcpyDeviceToHost);
    cudaFree(d_seen);
    cudaFree(d_out);
    return 0;
}
