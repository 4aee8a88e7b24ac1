// block_reduce.cu -- two-pass sum reduction with warp shuffles and per-warp shared partials.
//
// Why it is in the corpus: the canonical GLOBAL dependence. Pass 1 (reduce_sum, many blocks)
// writes one partial sum per block; pass 2 (the same kernel, one block) reads ALL partials, so
// the second launch's single block depends on every block of the first: the two launches must
// not be fused locally (principle P2). The kernel also exercises warp-level ops
// (__shfl_down_sync, inlined from a __device__ helper), a 32-float shared array (128 bytes) and
// exactly one __syncthreads, reached by every thread (the warp-0-only tail has no barrier).
// N = 20000 is not a multiple of the block size, so the first pass has a partial last block.
//
// Expected host model:
//   buffers (allocation order): d_in 80000 bytes (N floats), d_partial 316 bytes
//     (NUM_BLOCKS = (20000 + 255) / 256 = 79 floats), d_result 4 bytes.
//   copy H2D: d_in <- h_in (80000 bytes).
//   launches, no host loops:
//     reduce_sum grid (79,1,1) block (256,1,1) args (d_in, d_partial, 20000)
//     reduce_sum grid (1,1,1)  block (128,1,1) args (d_partial, d_result, 79)
//   cudaDeviceSynchronize, copy D2H h_result <- d_result (4 bytes), cudaFree of the three
//   buffers in allocation order.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cuda_runtime.h>

#define CHECK(call)                                                                   \
    do {                                                                              \
        cudaError_t err_ = (call);                                                    \
        if (err_ != cudaSuccess) {                                                    \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

#define N 20000
#define BLOCK 256
#define NUM_BLOCKS ((N + BLOCK - 1) / BLOCK)
#define FINAL_BLOCK 128
#define WARP 32

__device__ __forceinline__ float warp_reduce_sum(float v) {
    for (int offset = WARP / 2; offset > 0; offset >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

// out[blockIdx.x] = sum of in[blockIdx.x * blockDim.x .. + blockDim.x) (zero past n).
// blockDim.x must be a multiple of 32 and at most 1024.
__global__ void reduce_sum(const float* in, float* out, int n) {
    __shared__ float warp_sums[WARP];
    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + tid;
    float v = (i < n) ? in[i] : 0.0f;
    v = warp_reduce_sum(v);
    int lane = tid & (WARP - 1);
    int warp = tid / WARP;
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        int nwarps = blockDim.x / WARP;
        v = (lane < nwarps) ? warp_sums[lane] : 0.0f;
        v = warp_reduce_sum(v);
        if (lane == 0) out[blockIdx.x] = v;
    }
}

int main() {
    const size_t in_bytes = N * sizeof(float);
    const size_t partial_bytes = NUM_BLOCKS * sizeof(float);
    float* h_in = (float*)malloc(in_bytes);
    float h_result = 0.0f;
    // Multiples of 0.25 with small magnitude: every partial and the total are exact in fp32.
    for (int i = 0; i < N; ++i) h_in[i] = (float)(i % 17) * 0.25f - 2.0f;

    float *d_in, *d_partial, *d_result;
    CHECK(cudaMalloc(&d_in, in_bytes));
    CHECK(cudaMalloc(&d_partial, partial_bytes));
    CHECK(cudaMalloc(&d_result, sizeof(float)));

    CHECK(cudaMemcpy(d_in, h_in, in_bytes, cudaMemcpyHostToDevice));

    reduce_sum<<<NUM_BLOCKS, BLOCK>>>(d_in, d_partial, N);
    reduce_sum<<<1, FINAL_BLOCK>>>(d_partial, d_result, NUM_BLOCKS);
    CHECK(cudaDeviceSynchronize());

    CHECK(cudaMemcpy(&h_result, d_result, sizeof(float), cudaMemcpyDeviceToHost));

    double ref = 0.0;
    for (int i = 0; i < N; ++i) ref += h_in[i];
    int ok = fabs((double)h_result - ref) <= 1e-3 * fmax(1.0, fabs(ref));
    printf("block_reduce: %s (got %f, expected %f)\n", ok ? "PASS" : "FAIL", h_result, ref);

    CHECK(cudaFree(d_in));
    CHECK(cudaFree(d_partial));
    CHECK(cudaFree(d_result));
    free(h_in);
    return 0;
}
