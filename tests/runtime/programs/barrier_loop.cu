// barrier_loop.cu -- __syncthreads inside loops: a shared-memory rotation and a tree reduction.
//
// Block of B = 128 threads, 4 blocks, n = 512 ints. Each block loads its 128 values into s[],
// then `steps` times (a kernel argument, 5 here) every thread reads its right neighbour
// s[(t + 1) % B], waits at a barrier, and stores that value plus k into s[t], then waits again:
// after the loop s[t] = s0[(t + steps) % B] + (0 + 1 + ... + steps-1). rot[i] = s[t]. Then a
// shared-memory tree reduction with a barrier in every halving step: sums[block] = sum of the
// rotated values.
#include <cuda_runtime.h>

#define B 128
#define NB 4
#define N (B * NB)
#define STEPS 5

__global__ void rotate_reduce(const int* in, int* rot, int* sums, int steps)
{
    __shared__ int s[B];
    int t = threadIdx.x;
    int i = blockIdx.x * B + t;
    s[t] = in[i];
    __syncthreads();
    for (int k = 0; k < steps; ++k) {
        int v = s[(t + 1) % B];
        __syncthreads();
        s[t] = v + k;
        __syncthreads();
    }
    rot[i] = s[t];
    for (int stride = B / 2; stride > 0; stride >>= 1) {
        if (t < stride)
            s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0)
        sums[blockIdx.x] = s[0];
}

int main()
{
    int *d_in, *d_rot, *d_sums;
    int h_in[N];
    for (int i = 0; i < N; ++i)
        h_in[i] = i;
    cudaMalloc(&d_in, N * sizeof(int));
    cudaMalloc(&d_rot, N * sizeof(int));
    cudaMalloc(&d_sums, NB * sizeof(int));
    cudaMemcpy(d_in, h_in, N * sizeof(int), cudaMemcpyHostToDevice);
    rotate_reduce<<<NB, B>>>(d_in, d_rot, d_sums, STEPS);
    cudaDeviceSynchronize();
    cudaFree(d_in);
    cudaFree(d_rot);
    cudaFree(d_sums);
    return 0;
}
