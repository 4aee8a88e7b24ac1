// Written for sirius's tests by an independent check of the tool on programs it had not seen
// (2026-11-28; tests/unseen/test_unseen.py). Not from any benchmark suite.
// Inclusive prefix sum: warp-shuffle block scan, scan of block sums, add offsets.
#include <cstdio>
#include <cuda_runtime.h>

#define N 16384
#define BS 256
#define NBLK (N / BS)

__device__ int warp_scan(int v)
{
    int lane = threadIdx.x & 31;
    for (int d = 1; d < 32; d <<= 1) {
        int u = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += u;
    }
    return v;
}

__global__ void block_scan(const int* in, int* out, int* sums)
{
    __shared__ int warp_tot[BS / 32];
    int i = blockIdx.x * BS + threadIdx.x;
    int lane = threadIdx.x & 31;
    int wid = threadIdx.x >> 5;
    int v = warp_scan(in[i]);
    if (lane == 31) warp_tot[wid] = v;
    __syncthreads();
    if (wid == 0) {
        int w = (lane < BS / 32) ? warp_tot[lane] : 0;
        w = warp_scan(w);
        if (lane < BS / 32) warp_tot[lane] = w;
    }
    __syncthreads();
    if (wid > 0) v += warp_tot[wid - 1];
    out[i] = v;
    if (threadIdx.x == BS - 1) sums[blockIdx.x] = v;
}

__global__ void scan_sums(int* sums)
{
    // NBLK == 64: two warps
    __shared__ int tot[2];
    int lane = threadIdx.x & 31;
    int wid = threadIdx.x >> 5;
    int v = warp_scan(sums[threadIdx.x]);
    if (lane == 31) tot[wid] = v;
    __syncthreads();
    if (wid == 1) v += tot[0];
    sums[threadIdx.x] = v;
}

__global__ void add_offsets(int* out, const int* sums)
{
    int i = blockIdx.x * BS + threadIdx.x;
    if (blockIdx.x > 0) out[i] += sums[blockIdx.x - 1];
}

int main()
{
    static int hin[N], hout[N];
    for (int i = 0; i < N; ++i) hin[i] = (i * 7 + 3) % 11 - 4;
    int *din, *dout, *dsum;
    cudaMalloc(&din, N * 4);
    cudaMalloc(&dout, N * 4);
    cudaMalloc(&dsum, NBLK * 4);
    cudaMemcpy(din, hin, N * 4, cudaMemcpyHostToDevice);
    block_scan<<<NBLK, BS>>>(din, dout, dsum);
    scan_sums<<<1, NBLK>>>(dsum);
    add_offsets<<<NBLK, BS>>>(dout, dsum);
    cudaMemcpy(hout, dout, N * 4, cudaMemcpyDeviceToHost);
    long long cs = 0;
    int ref = 0, bad = 0;
    for (int i = 0; i < N; ++i) { ref += hin[i]; if (ref != hout[i]) bad++; cs += (long long)hout[i] * (i % 5 + 1); }
    printf("scan last %d bad %d checksum %lld\n", hout[N - 1], bad, cs);
    cudaFree(din); cudaFree(dout); cudaFree(dsum);
    return 0;
}
