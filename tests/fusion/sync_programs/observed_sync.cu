// observed_sync.cu -- three independent matrix products; the result of the first is copied
// back asynchronously (cudaMemcpyAsync into pinned memory) while the second runs. The host
// reads that copied-back value after the cudaDeviceSynchronize() that follows the second
// product and branches on it, before the third product is launched: the sync orders the
// host's read after the copy, so fusion must not cross it (the second and third products stay
// separate launches). The sync after the third product is idle.
// Lines the tests name: the async copy at 40, the observed sync at 42, the read at 44.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define N 32

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
    float* h;
    cudaMallocHost(&h, bytes);
    for (int i = 0; i < N * N; ++i) h[i] = (float)(i % 5) * 0.5f;
    float *dA, *dB, *dC, *dF, *dI;
    cudaMalloc(&dA, bytes);
    cudaMalloc(&dB, bytes);
    cudaMalloc(&dC, bytes);
    cudaMalloc(&dF, bytes);
    cudaMalloc(&dI, bytes);
    cudaMemcpy(dA, h, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(dB, h, bytes, cudaMemcpyHostToDevice);
    dim3 block(16, 16);
    dim3 grid(N / 16, N / 16);
    matmul<<<grid, block>>>(dA, dB, dC, N);
    cudaMemcpyAsync(h, dC, bytes, cudaMemcpyDeviceToHost, 0);
    matmul<<<grid, block>>>(dB, dA, dF, N);
    cudaDeviceSynchronize();
#ifndef NO_READ  // -DNO_READ: the host reads nothing after the sync, which is then crossed
    if (h[0] > 100.0f) printf("C[0] is large: %f\n", h[0]);
#endif
    matmul<<<grid, block>>>(dA, dA, dI, N);
    cudaDeviceSynchronize();
    cudaMemcpy(h, dF, bytes, cudaMemcpyDeviceToHost);
    cudaMemcpy(h, dI, bytes, cudaMemcpyDeviceToHost);
    cudaFree(dA); cudaFree(dB); cudaFree(dC); cudaFree(dF); cudaFree(dI);
    cudaFreeHost(h);
    return 0;
}
