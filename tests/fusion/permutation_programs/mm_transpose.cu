// mm_transpose.cu -- a matrix product C = A * B (32x32 floats) whose threads each compute a 2x2
// tile of C (block 8x8, grid 2x2), followed by a consumer of C launched 1-D (4 blocks of 256):
//
// - default: T = C^T, T[g] = C[(g % 32) * 32 + g / 32]. The read index permutes the digits of
//   g (g % 32 -> stride 32, g / 32 -> stride 1): a bijection. The dependence is GLOBAL (consumer
//   block 0 reads columns 0-7 of C, written by all four producer blocks), so only permutation
//   re-indexing fuses it: each producer thread runs the 4 consumer instances that read its tile,
//   most of them from other blocks of the original consumer launch.
// - -DHALF: T[g] = C[g / 2] over 2048 threads: two consumer instances read each element; the
//   read index is not injective, not a permutation (refused, stays 2 launches).
// - -DPAIR_FAR: 512 threads, T[g] = C[p] + C[p + 16 * 32] with p = (g % 16) * 32 + g / 16: the
//   two elements come from producer threads of different blocks (rows r and r + 16): refused.
// - -DPAIR_NEAR: the same with C[p + 32] (rows 2r and 2r + 1 of one 2x2 tile, one producer
//   thread): fused, 2 consumer instances per thread.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define N 32

__global__ void mm2x2(const float* A, const float* B, float* C) {
    int r = 2 * (blockIdx.y * blockDim.y + threadIdx.y);
    int c = 2 * (blockIdx.x * blockDim.x + threadIdx.x);
    float a00 = 0.f, a01 = 0.f, a10 = 0.f, a11 = 0.f;
    for (int k = 0; k < N; ++k) {
        a00 += A[r * N + k] * B[k * N + c];
        a01 += A[r * N + k] * B[k * N + c + 1];
        a10 += A[(r + 1) * N + k] * B[k * N + c];
        a11 += A[(r + 1) * N + k] * B[k * N + c + 1];
    }
    C[r * N + c] = a00;
    C[r * N + c + 1] = a01;
    C[(r + 1) * N + c] = a10;
    C[(r + 1) * N + c + 1] = a11;
}

__global__ void consume(const float* C, float* T) {
    int g = blockIdx.x * blockDim.x + threadIdx.x;
#if defined(HALF)
    T[g] = C[g / 2] * 2.0f;
#elif defined(PAIR_FAR)
    int p = (g % 16) * N + g / 16;
    T[g] = C[p] - C[p + 16 * N];
#elif defined(PAIR_NEAR)
    int p = (g % 16) * 2 * N + g / 16;
    T[g] = C[p] - C[p + N];
#else
    T[g] = C[(g % N) * N + g / N] + 1.0f;
#endif
}

int main() {
    const size_t bytes = N * N * sizeof(float);
#if defined(HALF)
    const int consumers = 2 * N * N;
#elif defined(PAIR_FAR) || defined(PAIR_NEAR)
    const int consumers = N * N / 2;
#else
    const int consumers = N * N;
#endif
    float* h = (float*)malloc(2 * bytes);
    for (int i = 0; i < N * N; ++i) h[i] = (float)(i % 13) * 0.125f - 0.5f;
    float *dA, *dB, *dC, *dT;
    cudaMalloc(&dA, bytes);
    cudaMalloc(&dB, bytes);
    cudaMalloc(&dC, bytes);
    cudaMalloc(&dT, consumers * sizeof(float));
    cudaMemcpy(dA, h, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(dB, h, bytes, cudaMemcpyHostToDevice);
    mm2x2<<<dim3(2, 2), dim3(8, 8)>>>(dA, dB, dC);
    consume<<<consumers / 256, 256>>>(dC, dT);
    cudaMemcpy(h, dT, consumers * sizeof(float), cudaMemcpyDeviceToHost);
    printf("T[1] = %f\n", h[1]);
    cudaFree(dA); cudaFree(dB); cudaFree(dC); cudaFree(dT);
    free(h);
    return 0;
}
