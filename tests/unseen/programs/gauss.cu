// Written for sirius's tests by an independent check of the tool on programs it had not seen
// (2026-11-28; tests/unseen/test_unseen.py). Not from any benchmark suite.
// Gaussian elimination: per pivot, compute multipliers (fan1) then eliminate (fan2). Size from argv.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void fan1(const float* a, float* m, int n, int t)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n - 1 - t) return;
    int row = i + t + 1;
    m[row * n + t] = a[row * n + t] / a[t * n + t];
}

__global__ void fan2(float* a, float* b, const float* m, int n, int t)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;   // row offset
    int y = blockIdx.y * blockDim.y + threadIdx.y;   // column offset
    if (x >= n - 1 - t || y >= n - t) return;
    int row = x + 1 + t;
    int col = y + t;
    a[row * n + col] -= m[row * n + t] * a[t * n + col];
    if (y == 0) b[row] -= m[row * n + t] * b[t];
}

int main(int argc, char** argv)
{
    int n = 32;
    if (argc > 1) n = atoi(argv[1]);
    size_t mat = (size_t)n * n * sizeof(float);
    float* ha = (float*)malloc(mat);
    float* hb = (float*)malloc(n * sizeof(float));
    for (int r = 0; r < n; ++r) {
        for (int c = 0; c < n; ++c)
            ha[r * n + c] = (r == c) ? (float)(n + 2) : (float)(((r * 3 + c * 5) % 7) - 3) * 0.25f;
        hb[r] = (float)(r % 5) + 1.0f;
    }
    float *da, *db, *dm;
    cudaMalloc(&da, mat);
    cudaMalloc(&db, n * sizeof(float));
    cudaMalloc(&dm, mat);
    cudaMemcpy(da, ha, mat, cudaMemcpyHostToDevice);
    cudaMemcpy(db, hb, n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemset(dm, 0, mat);
    int bs1 = 64;
    int g1 = (n + bs1 - 1) / bs1;
    dim3 b2(8, 8);
    dim3 g2((n + 7) / 8, (n + 7) / 8);
    for (int t = 0; t < n - 1; ++t) {
        fan1<<<g1, bs1>>>(da, dm, n, t);
        fan2<<<g2, b2>>>(da, db, dm, n, t);
    }
    cudaMemcpy(ha, da, mat, cudaMemcpyDeviceToHost);
    cudaMemcpy(hb, db, n * sizeof(float), cudaMemcpyDeviceToHost);
    // back substitution on the host
    float* xs = (float*)malloc(n * sizeof(float));
    for (int r = n - 1; r >= 0; --r) {
        float s = hb[r];
        for (int c = r + 1; c < n; ++c) s -= ha[r * n + c] * xs[c];
        xs[r] = s / ha[r * n + r];
    }
    double cs = 0;
    for (int r = 0; r < n; ++r) cs += xs[r] * (r + 1);
    printf("gauss n=%d checksum %.6f\n", n, cs);
    cudaFree(da); cudaFree(db); cudaFree(dm);
    free(ha); free(hb); free(xs);
    return 0;
}
