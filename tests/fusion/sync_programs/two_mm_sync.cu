// two_mm_sync.cu -- two independent matrix products C = A * B and F = D * E (32x32 floats),
// each launch followed by cudaDeviceSynchronize() and a timer read, as hand-written benchmarks
// do. Nothing the host observes lies between the two launches (the timers are not
// observations), so both syncs are idle: the products fuse into one horizontal launch, and the
// fused program keeps one sync after it.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cuda_runtime.h>

#define N 32

// -DNO_SYNC: the same program without the syncs (it must fuse the same way)
#ifdef NO_SYNC
#define SYNC_DEVICE()
#define SYNC_THREAD()
#else
#define SYNC_DEVICE() cudaDeviceSynchronize()
#define SYNC_THREAD() cudaThreadSynchronize()
#endif

__global__ void matmul(const float* A, const float* B, float* C, int n) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < n && col < n) {
        float acc = 0.0f;
        for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
        C[row * n + col] = acc;
    }
}

int main() {
    const size_t bytes = N * N * sizeof(float);
    float* h = (float*)malloc(bytes);
    for (int i = 0; i < N * N; ++i) h[i] = (float)(i % 7) * 0.25f;
    float *dA, *dB, *dC, *dD, *dE, *dF;
    cudaMalloc(&dA, bytes);
    cudaMalloc(&dB, bytes);
    cudaMalloc(&dC, bytes);
    cudaMalloc(&dD, bytes);
    cudaMalloc(&dE, bytes);
    cudaMalloc(&dF, bytes);
    cudaMemcpy(dA, h, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(dB, h, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(dD, h, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(dE, h, bytes, cudaMemcpyHostToDevice);
    dim3 block(16, 16);
    dim3 grid(N / 16, N / 16);
    clock_t t0 = clock();
    matmul<<<grid, block>>>(dA, dB, dC, N);
    SYNC_DEVICE();
    clock_t t1 = clock();
    printf("first product: %.3f ms\n", 1000.0 * (t1 - t0) / CLOCKS_PER_SEC);
    matmul<<<grid, block>>>(dD, dE, dF, N);
    SYNC_THREAD();
    clock_t t2 = clock();
    printf("second product: %.3f ms\n", 1000.0 * (t2 - t1) / CLOCKS_PER_SEC);
    cudaMemcpy(h, dC, bytes, cudaMemcpyDeviceToHost);
    printf("C[0] = %f\n", h[0]);
    cudaMemcpy(h, dF, bytes, cudaMemcpyDeviceToHost);
    printf("F[0] = %f\n", h[0]);
    cudaFree(dA); cudaFree(dB); cudaFree(dC); cudaFree(dD); cudaFree(dE); cudaFree(dF);
    free(h);
    return 0;
}
