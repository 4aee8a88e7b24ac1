// histogram_atomics.cu -- a 64-bin histogram: shared-memory atomics per block, then global ones.
//
// What it covers: atomicAdd on a __shared__ array at a data-dependent index (the bin of each
// input element), two barriers, a grid-stride loop (the grid is smaller than the input), and
// atomicAdd of every block's partial histogram into one global histogram. The global histogram
// is zeroed by a cudaMemset before the launch, so the host model has a memset op.
//
// Why it is in the corpus: data-dependent (non-affine) indices must make the access cover the
// whole array and be reported as inexact; atomics to global memory from every block form a
// reduction that a fusion must not split; the memset is a host op that writes a buffer a
// later launch reads.
//
// Expected host model:
//   buffers, in allocation order: d_data (N*4 = 32768 bytes), d_hist (NBINS*4 = 256 bytes)
//   ops: alloc d_data; alloc d_hist; copy H2D d_data <- h_data (32768 bytes);
//        memset d_hist value 0 (256 bytes);
//        launch histogram grid (8,1,1) block (256,1,1) smem 0 args (d_data, d_hist, 8192);
//        sync device; copy D2H h_hist <- d_hist (256 bytes); free d_data; free d_hist
//   kernel histogram: 256 bytes of static shared memory, two barriers.

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define CUDA_CHECK(call)                                                                   \
    do {                                                                                   \
        cudaError_t err_ = (call);                                                         \
        if (err_ != cudaSuccess) {                                                         \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_));  \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

#define N 8192      // input elements
#define NBINS 64    // bins (a power of two)
#define BLOCK 256
#define GRID 8      // 8 * 256 threads: every thread handles N / 2048 = 4 elements

__global__ void histogram(const unsigned int* data, unsigned int* hist, int n)
{
    __shared__ unsigned int s_hist[NBINS];
    for (int b = threadIdx.x; b < NBINS; b += blockDim.x)
        s_hist[b] = 0;
    __syncthreads();

    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&s_hist[data[i] % NBINS], 1u);
    __syncthreads();

    for (int b = threadIdx.x; b < NBINS; b += blockDim.x)
        atomicAdd(&hist[b], s_hist[b]);
}

int main()
{
    const size_t data_bytes = N * sizeof(unsigned int);
    const size_t hist_bytes = NBINS * sizeof(unsigned int);
    unsigned int* h_data = (unsigned int*)malloc(data_bytes);
    unsigned int* h_hist = (unsigned int*)malloc(hist_bytes);
    unsigned int ref[NBINS] = {0};

    // A deterministic, uneven distribution (a linear congruential sequence).
    unsigned int s = 12345u;
    for (int i = 0; i < N; ++i) {
        s = s * 1103515245u + 12345u;
        h_data[i] = (s >> 16) & 0x7fffu;
    }

    unsigned int *d_data, *d_hist;
    CUDA_CHECK(cudaMalloc(&d_data, data_bytes));
    CUDA_CHECK(cudaMalloc(&d_hist, hist_bytes));
    CUDA_CHECK(cudaMemcpy(d_data, h_data, data_bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(d_hist, 0, hist_bytes));

    histogram<<<GRID, BLOCK>>>(d_data, d_hist, N);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h_hist, d_hist, hist_bytes, cudaMemcpyDeviceToHost));

    for (int i = 0; i < N; ++i)
        ref[h_data[i] % NBINS]++;
    int bad = 0;
    unsigned int total = 0;
    for (int b = 0; b < NBINS; ++b) {
        if (h_hist[b] != ref[b])
            ++bad;
        total += h_hist[b];
    }
    printf("histogram_atomics: %s (%d wrong bins, %u counted)\n", bad ? "FAIL" : "PASS", bad,
           total);

    CUDA_CHECK(cudaFree(d_data));
    CUDA_CHECK(cudaFree(d_hist));
    free(h_data);
    free(h_hist);
    return 0;
}
