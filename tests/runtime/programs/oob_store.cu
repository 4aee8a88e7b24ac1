// oob_store.cu -- PLANTED BUG: an off-by-one bound (i <= n) stores one element past the end.
//
// n = 1000 floats, 4 blocks of 256 threads. out[i] = 2 v + 1 with v = in[i] (0 past the end),
// for i <= n: thread 232 of block 3 (i = 1000) stores 1.0f at out + 4000 bytes, one past the end.
// d_guard, allocated right after d_out, is copied in and never touched by the kernel.
#include <cuda_runtime.h>

#define N 1000
#define BLOCK 256
#define GUARD 64

__global__ void off_by_one(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = (i < n) ? in[i] : 0.0f;
    if (i <= n)
        out[i] = 2.0f * v + 1.0f;
}

int main()
{
    float *d_in, *d_out, *d_guard;
    float h_in[N], h_guard[GUARD];
    for (int i = 0; i < N; ++i)
        h_in[i] = (float)i;
    for (int i = 0; i < GUARD; ++i)
        h_guard[i] = -1.0f;
    cudaMalloc(&d_in, N * sizeof(float));
    cudaMalloc(&d_out, N * sizeof(float));
    cudaMalloc(&d_guard, GUARD * sizeof(float));
    cudaMemcpy(d_in, h_in, N * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(d_guard, h_guard, GUARD * sizeof(float), cudaMemcpyHostToDevice);
    off_by_one<<<(N + BLOCK - 1) / BLOCK, BLOCK>>>(d_in, d_out, N);
    cudaDeviceSynchronize();
    cudaFree(d_in);
    cudaFree(d_out);
    cudaFree(d_guard);
    return 0;
}
