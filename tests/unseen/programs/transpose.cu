// Written for sirius's tests by an independent check of the tool on programs it had not seen
// (2026-11-28; tests/unseen/test_unseen.py). Not from any benchmark suite.
// Tiled transpose through shared memory (padded tile), an elementwise op, and transpose back.
#include <cstdio>
#include <cuda_runtime.h>

#define W 128
#define H 96
#define TILE 32
#define ROWSPER 8

__global__ void transpose_tile(const float* in, float* out, int w, int h)
{
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y0 = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWSPER) {
        int y = y0 + j;
        if (x < w && y < h) tile[threadIdx.y + j][threadIdx.x] = in[y * w + x];
    }
    __syncthreads();
    int ox = blockIdx.y * TILE + threadIdx.x;
    int oy0 = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWSPER) {
        int oy = oy0 + j;
        if (ox < h && oy < w) out[oy * h + ox] = tile[threadIdx.x][threadIdx.y + j];
    }
}

__global__ void affine(float* a, int n, float mul, float add)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = a[i] * mul + add * (float)(i % 3);
}

int main()
{
    const int n = W * H;
    static float hin[W * H], hout[W * H];
    for (int i = 0; i < n; ++i) hin[i] = (float)((i * 29) % 113) * 0.125f;
    float *da, *db, *dc;
    cudaMalloc(&da, n * 4);
    cudaMalloc(&db, n * 4);
    cudaMalloc(&dc, n * 4);
    cudaMemcpy(da, hin, n * 4, cudaMemcpyHostToDevice);
    dim3 blk(TILE, ROWSPER);
    dim3 g1((W + TILE - 1) / TILE, (H + TILE - 1) / TILE);
    dim3 g2((H + TILE - 1) / TILE, (W + TILE - 1) / TILE);
    transpose_tile<<<g1, blk>>>(da, db, W, H);       // db is H x W transposed: W rows of H
    affine<<<(n + 255) / 256, 256>>>(db, n, 2.0f, 1.0f);
    transpose_tile<<<g2, blk>>>(db, dc, H, W);       // back to H rows of W
    affine<<<(n + 255) / 256, 256>>>(dc, n, 0.5f, -1.0f);
    cudaMemcpy(hout, dc, n * 4, cudaMemcpyDeviceToHost);
    double cs = 0;
    for (int i = 0; i < n; ++i) cs += hout[i] * ((i % 19) + 1);
    printf("transpose checksum %.6f\n", cs);
    cudaFree(da); cudaFree(db); cudaFree(dc);
    return 0;
}
