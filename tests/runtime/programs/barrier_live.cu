// barrier_live.cu -- barrier kernels as work-item loops (sirius/runtime/cpu/wiloop.py).
//
// Blocks of B = 64 threads, NB = 3 blocks, N = 192 ints.
//   live_values: values live across barriers: x (a loop-carried value), a local array loc[]
//     (volatile: it stays in memory, one per thread, in the thread's frame), a barrier in a
//     loop (`steps` = 5 times: s[t] = x; barrier; x = s[(t + k + 1) % B] + 3x; loc[k % 4] += x;
//     barrier) and one under a uniform `if (flag)` (x -= s[B - 1 - t]);
//     a[i] = x + 10 * (loc[0] + loc[1] + loc[2] + loc[3]), loc starting at {0, 1, 2, 3}.
//   two_arms: a barrier in each arm of a thread-dependent branch (odd threads: s[t] = in + 1,
//     barrier, v = 5 s[t ^ 1]; even: s[t] = 2 in, barrier, v = s[t ^ 1] - 7): every thread
//     reaches a barrier, not the same one; b[i] = v.
//   shuffled: a barrier and a warp shuffle (stays on fibers): v = s[B - 1 - t] after the
//     barrier, c[i] = v + (v of lane ^ 1).
#include <cuda_runtime.h>

#define B 64
#define NB 3
#define N (B * NB)

__global__ void live_values(const int* in, int* a, int steps, int flag)
{
    __shared__ int s[B];
    volatile int loc[4];
    int t = threadIdx.x;
    int i = blockIdx.x * B + t;
    int x = in[i];
    for (int j = 0; j < 4; ++j)
        loc[j] = j;
    for (int k = 0; k < steps; ++k) {
        s[t] = x;
        __syncthreads();
        x = s[(t + k + 1) % B] + 3 * x;
        loc[k & 3] += x;
        __syncthreads();
    }
    if (flag) {
        s[t] = x;
        __syncthreads();
        x -= s[B - 1 - t];
    }
    a[i] = x + 10 * (loc[0] + loc[1] + loc[2] + loc[3]);
}

__global__ void two_arms(const int* in, int* b)
{
    __shared__ int s[B];
    int t = threadIdx.x;
    int i = blockIdx.x * B + t;
    int v;
    if (t & 1) {
        s[t] = in[i] + 1;
        __syncthreads();
        v = s[t ^ 1] * 5;
    } else {
        s[t] = in[i] * 2;
        __syncthreads();
        v = s[t ^ 1] - 7;
    }
    b[i] = v;
}

__global__ void shuffled(const int* in, int* c)
{
    __shared__ int s[B];
    int t = threadIdx.x;
    int i = blockIdx.x * B + t;
    s[t] = in[i];
    __syncthreads();
    int v = s[B - 1 - t];
    c[i] = v + __shfl_xor_sync(0xffffffffu, v, 1);
}

int main()
{
    int h[N];
    for (int i = 0; i < N; ++i)
        h[i] = i % 17 - 8;
    int *d_in, *d_a, *d_b, *d_c;
    cudaMalloc(&d_in, N * sizeof(int));
    cudaMalloc(&d_a, N * sizeof(int));
    cudaMalloc(&d_b, N * sizeof(int));
    cudaMalloc(&d_c, N * sizeof(int));
    cudaMemcpy(d_in, h, N * sizeof(int), cudaMemcpyHostToDevice);
    live_values<<<NB, B>>>(d_in, d_a, 5, 1);
    two_arms<<<NB, B>>>(d_in, d_b);
    shuffled<<<NB, B>>>(d_in, d_c);
    cudaDeviceSynchronize();
    cudaMemcpy(h, d_a, N * sizeof(int), cudaMemcpyDeviceToHost);
    cudaFree(d_in);
    cudaFree(d_a);
    cudaFree(d_b);
    cudaFree(d_c);
    return 0;
}
