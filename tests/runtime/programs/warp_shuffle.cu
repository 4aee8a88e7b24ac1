// warp_shuffle.cu -- __shfl_{up,down,xor,}_sync on int and on float, at full width and width 8.
//
// Each kernel writes NOPS results per thread: out[k * n + i] is the k-th shuffle of thread i.
//   k = 0 up by 3          k = 1 down by 5        k = 2 xor 7          k = 3 idx (7*lane + 3) & 31
//   k = 4 down by 3, w 8   k = 5 up by 2, w 8     k = 6 idx lane+1, w 8 (srcLane mod 8 in the
//   8-lane segment)        k = 7 xor 3, w 8
// Launch: 2 blocks of 64 threads (4 full warps), n = 128, no bounds check (all lanes converged).
#include <cuda_runtime.h>

#define N 128
#define BLOCK 64
#define NOPS 8

__global__ void shfl_int(const int* in, int* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x & 31;
    int v = in[i];
    out[0 * n + i] = __shfl_up_sync(0xffffffffu, v, 3);
    out[1 * n + i] = __shfl_down_sync(0xffffffffu, v, 5);
    out[2 * n + i] = __shfl_xor_sync(0xffffffffu, v, 7);
    out[3 * n + i] = __shfl_sync(0xffffffffu, v, (7 * lane + 3) & 31);
    out[4 * n + i] = __shfl_down_sync(0xffffffffu, v, 3, 8);
    out[5 * n + i] = __shfl_up_sync(0xffffffffu, v, 2, 8);
    out[6 * n + i] = __shfl_sync(0xffffffffu, v, lane + 1, 8);
    out[7 * n + i] = __shfl_xor_sync(0xffffffffu, v, 3, 8);
}

__global__ void shfl_float(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x & 31;
    float v = in[i];
    out[0 * n + i] = __shfl_up_sync(0xffffffffu, v, 3);
    out[1 * n + i] = __shfl_down_sync(0xffffffffu, v, 5);
    out[2 * n + i] = __shfl_xor_sync(0xffffffffu, v, 7);
    out[3 * n + i] = __shfl_sync(0xffffffffu, v, (7 * lane + 3) & 31);
    out[4 * n + i] = __shfl_down_sync(0xffffffffu, v, 3, 8);
    out[5 * n + i] = __shfl_up_sync(0xffffffffu, v, 2, 8);
    out[6 * n + i] = __shfl_sync(0xffffffffu, v, lane + 1, 8);
    out[7 * n + i] = __shfl_xor_sync(0xffffffffu, v, 3, 8);
}

int main()
{
    int *d_ai, *d_oi;
    float *d_af, *d_of;
    int h_ai[N];
    float h_af[N];
    for (int i = 0; i < N; ++i) {
        h_ai[i] = i * 7 - 300;
        h_af[i] = 0.5f * i;
    }
    cudaMalloc(&d_ai, N * sizeof(int));
    cudaMalloc(&d_oi, NOPS * N * sizeof(int));
    cudaMalloc(&d_af, N * sizeof(float));
    cudaMalloc(&d_of, NOPS * N * sizeof(float));
    cudaMemcpy(d_ai, h_ai, N * sizeof(int), cudaMemcpyHostToDevice);
    cudaMemcpy(d_af, h_af, N * sizeof(float), cudaMemcpyHostToDevice);
    shfl_int<<<N / BLOCK, BLOCK>>>(d_ai, d_oi, N);
    shfl_float<<<N / BLOCK, BLOCK>>>(d_af, d_of, N);
    cudaDeviceSynchronize();
    cudaFree(d_ai);
    cudaFree(d_oi);
    cudaFree(d_af);
    cudaFree(d_of);
    return 0;
}
