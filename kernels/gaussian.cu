// gaussian.cu -- Gaussian elimination in the style of Rodinia's gaussian (Fan1 / Fan2).
//
// What it covers: a host loop `for t in [0, N-1)` with two launches per iteration whose LAUNCH
// GRIDS SHRINK with the loop variable (only the rows below t and the columns from t on are
// left), and whose scalar arguments depend on t (`t` itself and `j1 = N - t`). Grid sizes are
// quasi-affine in t: Fan1 has floor((N - 1 - t + 31) / 32) blocks, Fan2 a 2-D grid of
// (floor((N - 1 - t + 15) / 16), floor((N - t + 15) / 16)) blocks.
//
// Why it is in the corpus: Rodinia's gaussian is the standard example of a host loop with a
// loop-carried GLOBAL dependence between launches (Fan2 at step t writes the rows Fan1 at step
// t+1 divides by its pivot), and of a launch configuration that is a function of the loop
// variable rather than a constant.
//
// Expected host model (N = 64):
//   buffers, in allocation order: d_m (N*N*4 = 16384 bytes), d_a (16384), d_b (N*4 = 256)
//   ops: 3 allocs; memset d_m 0 (16384 bytes); copy H2D d_a; copy H2D d_b;
//        loop t in [0, 63) step 1 {
//            launch Fan1 grid (floor((94 - t)/32), 1, 1) block (32,1,1) smem 0
//                   args (d_m, d_a, 64, t); sync device;
//            launch Fan2 grid (floor((78 - t)/16), floor((79 - t)/16), 1) block (16,16,1) smem 0
//                   args (d_m, d_a, d_b, 64, 64 - t, t); sync device }
//        copy D2H d_m; copy D2H d_a; copy D2H d_b; 3 frees
//   kernels Fan1, Fan2: no shared memory, no barriers.
// The back substitution runs on the host, as in Rodinia.

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define N 64
#define FAN1_BLOCK 32
#define FAN2_BLOCK 16

// m[r][t] = a[r][t] / a[t][t] for the rows r = t+1 .. size-1.
__global__ void Fan1(float* m_cuda, float* a_cuda, int size, int t)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= size - 1 - t)
        return;
    int r = row + 1 + t;
    m_cuda[size * r + t] = a_cuda[size * r + t] / a_cuda[size * t + t];
}

// a[r][c] -= m[r][t] * a[t][c] for r in t+1 .. size-1, c in t .. size-1 (j1 = size - t columns);
// the threads of column t also update the right-hand side b.
__global__ void Fan2(float* m_cuda, float* a_cuda, float* b_cuda, int size, int j1, int t)
{
    int xidx = blockIdx.x * blockDim.x + threadIdx.x;
    int yidx = blockIdx.y * blockDim.y + threadIdx.y;
    if (xidx >= size - 1 - t)
        return;
    if (yidx >= j1)
        return;
    int r = xidx + 1 + t;
    int c = yidx + t;
    a_cuda[size * r + c] -= m_cuda[size * r + t] * a_cuda[size * t + c];
    if (yidx == 0)
        b_cuda[r] -= m_cuda[size * r + t] * b_cuda[t];
}

static void back_substitute(const float* a, const float* b, float* x)
{
    for (int i = N - 1; i >= 0; --i) {
        float s = b[i];
        for (int j = i + 1; j < N; ++j)
            s -= a[i * N + j] * x[j];
        x[i] = s / a[i * N + i];
    }
}

int main()
{
    const size_t mat_bytes = N * N * sizeof(float);
    const size_t vec_bytes = N * sizeof(float);
    float* h_a = (float*)malloc(mat_bytes);
    float* h_m = (float*)malloc(mat_bytes);
    float* h_b = (float*)malloc(vec_bytes);
    float* r_a = (float*)malloc(mat_bytes);
    float* r_b = (float*)malloc(vec_bytes);
    float* x = (float*)malloc(vec_bytes);
    float* r_x = (float*)malloc(vec_bytes);

    // A diagonally dominant matrix (no pivoting needed); b = A * ones, so x should be all ones.
    for (int i = 0; i < N; ++i) {
        float s = 0.0f;
        for (int j = 0; j < N; ++j) {
            float v = (i == j) ? (float)N : (float)((i * 3 + j * 5) % 7) / 7.0f;
            h_a[i * N + j] = v;
            r_a[i * N + j] = v;
            s += v;
        }
        h_b[i] = s;
        r_b[i] = s;
    }

    float *d_m, *d_a, *d_b;
    cudaMalloc(&d_m, mat_bytes);
    cudaMalloc(&d_a, mat_bytes);
    cudaMalloc(&d_b, vec_bytes);
    cudaMemset(d_m, 0, mat_bytes);
    cudaMemcpy(d_a, h_a, mat_bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(d_b, h_b, vec_bytes, cudaMemcpyHostToDevice);

    for (int t = 0; t < N - 1; ++t) {
        int rows = N - 1 - t;  // rows below the pivot
        int cols = N - t;      // columns from the pivot on
        dim3 block1(FAN1_BLOCK);
        dim3 grid1((rows + FAN1_BLOCK - 1) / FAN1_BLOCK);
        dim3 block2(FAN2_BLOCK, FAN2_BLOCK);
        dim3 grid2((rows + FAN2_BLOCK - 1) / FAN2_BLOCK, (cols + FAN2_BLOCK - 1) / FAN2_BLOCK);
        Fan1<<<grid1, block1>>>(d_m, d_a, N, t);
        cudaDeviceSynchronize();
        Fan2<<<grid2, block2>>>(d_m, d_a, d_b, N, N - t, t);
        cudaDeviceSynchronize();
    }
    cudaMemcpy(h_m, d_m, mat_bytes, cudaMemcpyDeviceToHost);
    cudaMemcpy(h_a, d_a, mat_bytes, cudaMemcpyDeviceToHost);
    cudaMemcpy(h_b, d_b, vec_bytes, cudaMemcpyDeviceToHost);
    back_substitute(h_a, h_b, x);

    // CPU reference: the same elimination.
    for (int t = 0; t < N - 1; ++t)
        for (int r = t + 1; r < N; ++r) {
            float mult = r_a[r * N + t] / r_a[t * N + t];
            for (int c = t; c < N; ++c)
                r_a[r * N + c] -= mult * r_a[t * N + c];
            r_b[r] -= mult * r_b[t];
        }
    back_substitute(r_a, r_b, r_x);
    int bad = 0;
    for (int i = 0; i < N; ++i)
        if (fabsf(x[i] - r_x[i]) > 1e-4f || fabsf(x[i] - 1.0f) > 1e-3f)
            ++bad;
    printf("gaussian: %s (%d mismatches)\n", bad ? "FAIL" : "PASS", bad);

    cudaFree(d_m);
    cudaFree(d_a);
    cudaFree(d_b);
    free(h_a);
    free(h_m);
    free(h_b);
    free(r_a);
    free(r_b);
    free(x);
    free(r_x);
    return 0;
}
