// tiled_matmul_64.cu -- benchmark input for the CPU executor (scripts/bench_executor.py):
// C = A * B with 16x16 shared-memory tiles, 256x256 matrices: 64 blocks of 256 threads, two
// barriers per tile step (16 steps), so every block runs on the cooperative (fiber) path.
#include <cuda_runtime.h>
#include <cstdlib>

#define M 256
#define TILE 16

__global__ void matmul_tiled(const float* A, const float* B, float* C, int n)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < n / TILE; ++t) {
        As[threadIdx.y][threadIdx.x] = A[row * n + t * TILE + threadIdx.x];
        Bs[threadIdx.y][threadIdx.x] = B[(t * TILE + threadIdx.y) * n + col];
        __syncthreads();
        for (int k = 0; k < TILE; ++k)
            acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    C[row * n + col] = acc;
}

int main()
{
    size_t bytes = M * M * sizeof(float);
    float* h = (float*)malloc(bytes);
    for (int i = 0; i < M * M; ++i) h[i] = (float)(i % 7) * 0.125f;
    float *a, *b, *c;
    cudaMalloc(&a, bytes);
    cudaMalloc(&b, bytes);
    cudaMalloc(&c, bytes);
    cudaMemcpy(a, h, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(b, h, bytes, cudaMemcpyHostToDevice);
    dim3 block(TILE, TILE);
    dim3 grid(M / TILE, M / TILE);
    matmul_tiled<<<grid, block>>>(a, b, c, M);
    cudaDeviceSynchronize();
    cudaMemcpy(h, c, bytes, cudaMemcpyDeviceToHost);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    free(h);
    return 0;
}
