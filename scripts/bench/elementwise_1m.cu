// elementwise_1m.cu -- benchmark input for the CPU executor (scripts/bench_executor.py):
// one launch of 2^20 threads, each doing a few arithmetic instructions on one float.
#include <cuda_runtime.h>
#include <cstdlib>

#define N (1 << 20)

__global__ void axpb_relu(const float* x, float* y, float a, float b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = a * x[i] + b;
        y[i] = v > 0.0f ? v : 0.01f * v;
    }
}

int main()
{
    float* h = (float*)malloc(N * sizeof(float));
    for (int i = 0; i < N; ++i) h[i] = (float)(i % 17) - 8.0f;
    float *x, *y;
    cudaMalloc(&x, N * sizeof(float));
    cudaMalloc(&y, N * sizeof(float));
    cudaMemcpy(x, h, N * sizeof(float), cudaMemcpyHostToDevice);
    axpb_relu<<<N / 256, 256>>>(x, y, 1.5f, -0.25f, N);
    cudaDeviceSynchronize();
    cudaMemcpy(h, y, N * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(x);
    cudaFree(y);
    free(h);
    return 0;
}
