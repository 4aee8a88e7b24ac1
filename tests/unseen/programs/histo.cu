// Written for sirius's tests by an independent check of the tool on programs it had not seen
// (2026-11-28; tests/unseen/test_unseen.py). Not from any benchmark suite.
// Histogram: per-block shared histogram with atomics, merged into global with atomics, then a CDF.
#include <cstdio>
#include <cuda_runtime.h>

#define N 65536
#define BINS 64
#define BS 256
#define NB 32

__global__ void clear(unsigned* hist)
{
    int i = threadIdx.x;
    if (i < BINS) hist[i] = 0;
}

__global__ void histo(const unsigned char* data, unsigned* hist, int n)
{
    __shared__ unsigned local[BINS];
    for (int b = threadIdx.x; b < BINS; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&local[data[i] % BINS], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < BINS; b += blockDim.x)
        if (local[b]) atomicAdd(&hist[b], local[b]);
}

__global__ void cdf(const unsigned* hist, unsigned* out)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        unsigned run = 0;
        for (int b = 0; b < BINS; ++b) { run += hist[b]; out[b] = run; }
    }
}

int main()
{
    static unsigned char hd[N];
    unsigned s = 7u;
    for (int i = 0; i < N; ++i) { s = s * 1664525u + 1013904223u; hd[i] = (unsigned char)(s >> 24); }
    unsigned char* dd;
    unsigned *dh, *dc;
    cudaMalloc(&dd, N);
    cudaMalloc(&dh, BINS * sizeof(unsigned));
    cudaMalloc(&dc, BINS * sizeof(unsigned));
    cudaMemcpy(dd, hd, N, cudaMemcpyHostToDevice);
    clear<<<1, BINS>>>(dh);
    histo<<<NB, BS>>>(dd, dh, N);
    histo<<<NB, BS>>>(dd, dh, N / 2);
    cdf<<<1, 32>>>(dh, dc);
    unsigned hh[BINS], hc[BINS];
    cudaMemcpy(hh, dh, sizeof(hh), cudaMemcpyDeviceToHost);
    cudaMemcpy(hc, dc, sizeof(hc), cudaMemcpyDeviceToHost);
    unsigned long long cs = 0;
    for (int b = 0; b < BINS; ++b) cs += (unsigned long long)hh[b] * (b + 1) + hc[b];
    printf("histo total %u checksum %llu\n", hc[BINS - 1], cs);
    cudaFree(dd); cudaFree(dh); cudaFree(dc);
    return 0;
}
