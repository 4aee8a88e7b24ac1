// helper_launch.cu -- launches made inside host helper functions, not in main itself.
//
// What it covers: main calls `forward` twice with different buffers (each call launches two
// kernels) and `accumulate` once (a counted loop of launches whose pointer argument moves with
// the loop variable, its trip count a parameter of the helper). `forward` is marked noinline so
// that the host IR keeps the calls: the host model must follow calls and bind the helpers'
// parameters to the caller's buffers and constants. Then one device-to-device cudaMemcpy copies a
// window at non-zero byte offsets on both sides.
//
// Why it is in the corpus: real programs wrap their launches in layer functions; a host model
// that only looks at main would see no launches.
//
// Expected host model (N = 512):
//   buffers, in allocation order: d_x, d_tmp, d_y1, d_y2 (N*4 = 2048 bytes each),
//                                 d_rows (NROWS*N*4 = 6144 bytes), d_win (WIN*4 = 384 bytes)
//   ops: 6 allocs; copy H2D d_x <- h_x (2048 bytes); copy H2D d_rows <- h_rows (6144 bytes);
//        memset d_win 0 (384 bytes);
//        forward(d_x, d_y1, d_tmp):  launch scale (d_x, d_tmp, 2.0, 512);
//                                    launch add_relu (d_tmp, d_x, d_y1, 512)
//        forward(d_y1, d_y2, d_tmp): launch scale (d_y1, d_tmp, 2.0, 512);
//                                    launch add_relu (d_tmp, d_y1, d_y2, 512)
//        accumulate(d_y2, d_rows, 3): loop r in [0, 3) step 1 {
//                                    launch axpy (d_y2, d_rows + r*2048 bytes, 0.5, 512) }
//        (every launch: grid (4,1,1) block (128,1,1) smem 0)
//        copy D2D d_win + 64 bytes <- d_y2 + 128 bytes (256 bytes); sync device;
//        copy D2H h_y <- d_y2 (2048 bytes); copy D2H h_win <- d_win (384 bytes); 6 frees
//   kernels scale, add_relu, axpy: no shared memory, no barriers.

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define N 512
#define NROWS 3
#define WIN 96
#define BLOCK 128

// y = a * x
__global__ void scale(const float* x, float* y, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i];
}

// y = max(a + b, 0)
__global__ void add_relu(const float* a, const float* b, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = fmaxf(a[i] + b[i], 0.0f);
}

// acc += alpha * x
__global__ void axpy(float* acc, const float* x, float alpha, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        acc[i] += alpha * x[i];
}

// y = relu(2x + x) through the scratch buffer tmp.
__attribute__((noinline)) static void forward(const float* x, float* y, float* tmp, int n)
{
    int grid = (n + BLOCK - 1) / BLOCK;
    scale<<<grid, BLOCK>>>(x, tmp, 2.0f, n);
    add_relu<<<grid, BLOCK>>>(tmp, x, y, n);
}

// acc += 0.5 * rows[r] for each of the nrows rows of n elements.
static void accumulate(float* acc, const float* rows, int n, int nrows)
{
    int grid = (n + BLOCK - 1) / BLOCK;
    for (int r = 0; r < nrows; ++r)
        axpy<<<grid, BLOCK>>>(acc, rows + r * n, 0.5f, n);
}

static void forward_cpu(const float* x, float* y, int n)
{
    for (int i = 0; i < n; ++i)
        y[i] = fmaxf(2.0f * x[i] + x[i], 0.0f);
}

int main()
{
    const size_t bytes = N * sizeof(float);
    const size_t rows_bytes = NROWS * N * sizeof(float);
    const size_t win_bytes = WIN * sizeof(float);
    float* h_x = (float*)malloc(bytes);
    float* h_rows = (float*)malloc(rows_bytes);
    float* h_y = (float*)malloc(bytes);
    float* h_win = (float*)malloc(win_bytes);
    float* r_y1 = (float*)malloc(bytes);
    float* r_y2 = (float*)malloc(bytes);
    for (int i = 0; i < N; ++i)
        h_x[i] = (float)(i % 23 - 11) / 8.0f;
    for (int i = 0; i < NROWS * N; ++i)
        h_rows[i] = (float)(i % 9) / 4.0f;

    float *d_x, *d_tmp, *d_y1, *d_y2, *d_rows, *d_win;
    cudaMalloc(&d_x, bytes);
    cudaMalloc(&d_tmp, bytes);
    cudaMalloc(&d_y1, bytes);
    cudaMalloc(&d_y2, bytes);
    cudaMalloc(&d_rows, rows_bytes);
    cudaMalloc(&d_win, win_bytes);
    cudaMemcpy(d_x, h_x, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(d_rows, h_rows, rows_bytes, cudaMemcpyHostToDevice);
    cudaMemset(d_win, 0, win_bytes);

    forward(d_x, d_y1, d_tmp, N);
    forward(d_y1, d_y2, d_tmp, N);
    accumulate(d_y2, d_rows, N, NROWS);
    // d_win[16 .. 80) = d_y2[32 .. 96)
    cudaMemcpy(d_win + 16, d_y2 + 32, 64 * sizeof(float), cudaMemcpyDeviceToDevice);
    cudaDeviceSynchronize();
    cudaMemcpy(h_y, d_y2, bytes, cudaMemcpyDeviceToHost);
    cudaMemcpy(h_win, d_win, win_bytes, cudaMemcpyDeviceToHost);

    forward_cpu(h_x, r_y1, N);
    forward_cpu(r_y1, r_y2, N);
    for (int r = 0; r < NROWS; ++r)
        for (int i = 0; i < N; ++i)
            r_y2[i] += 0.5f * h_rows[r * N + i];
    int bad = 0;
    for (int i = 0; i < N; ++i)
        if (fabsf(h_y[i] - r_y2[i]) > 1e-4f)
            ++bad;
    for (int i = 0; i < WIN; ++i) {
        float ref = (i >= 16 && i < 80) ? r_y2[i + 16] : 0.0f;
        if (fabsf(h_win[i] - ref) > 1e-4f)
            ++bad;
    }
    printf("helper_launch: %s (%d mismatches)\n", bad ? "FAIL" : "PASS", bad);

    cudaFree(d_x);
    cudaFree(d_tmp);
    cudaFree(d_y1);
    cudaFree(d_y2);
    cudaFree(d_rows);
    cudaFree(d_win);
    free(h_x);
    free(h_rows);
    free(h_y);
    free(h_win);
    free(r_y1);
    free(r_y2);
    return 0;
}
