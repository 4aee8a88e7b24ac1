// early_return.cu -- kernels that begin with a bounds check and an early `return`.
//
// What it covers: `if (i >= n) return;` at the top of a kernel, with n = 1000 not a multiple of
// the block size, so the last block is partly idle; a second kernel consumes the first one's
// output elementwise. The second launch deliberately uses a grid sized for a larger capacity
// (N_MAX = 2048 elements), which over-covers n by more than a block: the access relations must
// be restricted by the guard (i < n) or the analysis would see out-of-bounds accesses.
// Scalar float arguments (a, b) are passed as constants.
//
// Why it is in the corpus: the early-return guard is the most common shape of a boundary check in
// hand-written CUDA (TVM writes `if (cond) { ... }` instead); the guard is an affine branch
// condition that must restrict the domain of the accesses after it.
//
// Expected host model:
//   buffers, in allocation order: d_x, d_y, d_z (N*4 = 4000 bytes each)
//   ops: 3 allocs; copy H2D d_x <- h_x (4000 bytes);
//        launch scale_shift grid (4,1,1) block (256,1,1) smem 0 args (d_x, d_y, 2.0, 0.5, 1000);
//        launch square_diff grid (16,1,1) block (128,1,1) smem 0 args (d_y, d_x, d_z, 1000);
//        sync device; copy D2H h_z <- d_z (4000 bytes); 3 frees
//   kernels scale_shift, square_diff: no shared memory, no barriers.

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define N 1000       // elements: not a multiple of any block size used here
#define N_MAX 2048   // the capacity the second launch's grid is sized for
#define BLOCK1 256
#define BLOCK2 128

// y = a * x + b
__global__ void scale_shift(const float* x, float* y, float a, float b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    y[i] = a * x[i] + b;
}

// z = y * y - x
__global__ void square_diff(const float* y, const float* x, float* z, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float v = y[i];
    z[i] = v * v - x[i];
}

int main()
{
    const size_t bytes = N * sizeof(float);
    float* h_x = (float*)malloc(bytes);
    float* h_z = (float*)malloc(bytes);
    for (int i = 0; i < N; ++i)
        h_x[i] = (float)(i % 17) * 0.25f - 2.0f;

    float *d_x, *d_y, *d_z;
    cudaMalloc(&d_x, bytes);
    cudaMalloc(&d_y, bytes);
    cudaMalloc(&d_z, bytes);
    cudaMemcpy(d_x, h_x, bytes, cudaMemcpyHostToDevice);

    // Exactly enough blocks: ceil(1000 / 256) = 4 blocks, 24 idle threads in the last one.
    scale_shift<<<(N + BLOCK1 - 1) / BLOCK1, BLOCK1>>>(d_x, d_y, 2.0f, 0.5f, N);
    // A grid sized for N_MAX: 16 blocks of 128 = 2048 threads, 1048 of them idle.
    square_diff<<<N_MAX / BLOCK2, BLOCK2>>>(d_y, d_x, d_z, N);
    cudaDeviceSynchronize();
    cudaMemcpy(h_z, d_z, bytes, cudaMemcpyDeviceToHost);

    int bad = 0;
    for (int i = 0; i < N; ++i) {
        float y = 2.0f * h_x[i] + 0.5f;
        float ref = y * y - h_x[i];
        if (fabsf(h_z[i] - ref) > 1e-4f)
            ++bad;
    }
    printf("early_return: %s (%d mismatches)\n", bad ? "FAIL" : "PASS", bad);

    cudaFree(d_x);
    cudaFree(d_y);
    cudaFree(d_z);
    free(h_x);
    free(h_z);
    return 0;
}
