// index64.cu -- 64-bit index arithmetic: products beyond 2^32, pointers offset by 2^33
// elements and back, and long long data.
//
// n = 1000, 4 blocks of 256 threads (24 idle). With big = 4294967311 (> 2^32) and
// off = 2^33 passed as 64-bit scalars:
//   gather64: out[i] = in[(i * big) % n]     (i * big needs 64 bits)
//   offset64: out2[i] = (in + off)[i - off]  (an address computed 2^35 bytes past in, then back)
//   wide64:   w[i] = ((long long)in_i[i] << 33) + i * big
#include <cuda_runtime.h>

#define N 1000
#define BLOCK 256

__global__ void gather64(const float* in, float* out, long long big, int n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)n)
        out[i] = in[((long long)i * big) % n];
}

__global__ void offset64(const float* in, float* out2, long long off, int n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float* p = in + off;
        out2[i] = p[i - off];
    }
}

__global__ void wide64(const int* in_i, long long* w, long long big, int n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        w[i] = ((long long)in_i[i] << 33) + i * big;
}

int main()
{
    float *d_in, *d_out, *d_out2;
    int* d_in_i;
    long long* d_w;
    const long long big = 4294967311LL;
    const long long off = 1LL << 33;
    cudaMalloc(&d_in, N * sizeof(float));
    cudaMalloc(&d_out, N * sizeof(float));
    cudaMalloc(&d_out2, N * sizeof(float));
    cudaMalloc(&d_in_i, N * sizeof(int));
    cudaMalloc(&d_w, N * sizeof(long long));
    int grid = (N + BLOCK - 1) / BLOCK;
    gather64<<<grid, BLOCK>>>(d_in, d_out, big, N);
    offset64<<<grid, BLOCK>>>(d_in, d_out2, off, N);
    wide64<<<grid, BLOCK>>>(d_in_i, d_w, big, N);
    cudaDeviceSynchronize();
    cudaFree(d_in);
    cudaFree(d_out);
    cudaFree(d_out2);
    cudaFree(d_in_i);
    cudaFree(d_w);
    return 0;
}
