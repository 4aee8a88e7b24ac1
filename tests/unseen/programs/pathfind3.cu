// Written for sirius's tests by an independent check of the tool on programs it had not seen
// (2026-11-28; tests/unseen/test_unseen.py). Not from any benchmark suite.
// Row-by-row min-cost path dynamic program; each row is a launch reading the previous row.
#include <cstdio>
#include <cuda_runtime.h>

#define COLS 2048
#define ROWS 24
#define BS 256

__global__ void dp_row(const int* wall, const int* prev, int* cur, int row, int cols)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    int best = prev[c];
    if (c > 0 && prev[c - 1] < best) best = prev[c - 1];
    if (c < cols - 1 && prev[c + 1] < best) best = prev[c + 1];
    cur[c] = best + wall[row * cols + c];
}

__global__ void init_row(const int* wall, int* first, int cols)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < cols) first[c] = wall[c];
}

int main()
{
    int total = ROWS * COLS;
    int* h_wall = (int*)malloc(total * sizeof(int));
    unsigned s = 12345u;
    for (int i = 0; i < total; ++i) {
        s = s * 1103515245u + 12345u;
        h_wall[i] = (int)((s >> 16) % 10);
    }
    int *d_wall, *d_r0, *d_r1;
    cudaMalloc(&d_wall, total * sizeof(int));
    cudaMalloc(&d_r0, COLS * sizeof(int));
    cudaMalloc(&d_r1, COLS * sizeof(int));
    cudaMemcpy(d_wall, h_wall, total * sizeof(int), cudaMemcpyHostToDevice);
    int blocks = (COLS + BS - 1) / BS;
    init_row<<<blocks, BS>>>(d_wall, d_r0, COLS);
    int* pa = d_r0; int* pb = d_r1;
    for (int r = 1; r < ROWS; ++r) {
        dp_row<<<blocks, BS>>>(d_wall, pa, pb, r, COLS);
        int* tmp = pa; pa = pb; pb = tmp;
    }
    int* h_res = (int*)malloc(COLS * sizeof(int));
    cudaMemcpy(h_res, pa, COLS * sizeof(int), cudaMemcpyDeviceToHost);
    long long sum = 0;
    int mn = h_res[0];
    for (int c = 0; c < COLS; ++c) { sum += (long long)h_res[c] * (c % 7 + 1); if (h_res[c] < mn) mn = h_res[c]; }
    printf("pathfinder min %d checksum %lld\n", mn, sum);
    cudaFree(d_wall); cudaFree(d_r0); cudaFree(d_r1);
    free(h_wall); free(h_res);
    return 0;
}
