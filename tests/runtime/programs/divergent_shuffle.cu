// divergent_shuffle.cu -- PLANTED BUG: a full-mask __shfl_down_sync that only half a warp calls.
//
// One block of 32 threads; lanes 0..15 call __shfl_down_sync(0xffffffff, ...) while lanes
// 16..31 skip it. The mask promises all 32 lanes: undefined on a GPU; the executor must report
// it (or complete it for the lanes that arrive), never hang.
#include <cuda_runtime.h>

__global__ void half_shuffle(int* x)
{
    int t = threadIdx.x;
    int v = x[t];
    if (t < 16)
        v = __shfl_down_sync(0xffffffffu, v, 1);
    x[t] = v;
}

int main()
{
    int* d_x;
    cudaMalloc(&d_x, 32 * sizeof(int));
    half_shuffle<<<1, 32>>>(d_x);
    cudaDeviceSynchronize();
    cudaFree(d_x);
    return 0;
}
