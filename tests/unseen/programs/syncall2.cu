// Written for sirius's tests by an independent check of the tool on programs it had not seen
// (2026-11-28; tests/unseen/test_unseen.py). Not from any benchmark suite.
// Iterative vector updates with cudaDeviceSynchronize() after every launch, plus a dot product.
#include <cstdio>
#include <cuda_runtime.h>

#define N 8192
#define BS 128
#define NB (N / BS)
#define ITERS 6

__global__ void axpy(int it, const float* x, float* y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float a = 0.1f * (it + 1);
    if (i < N) y[i] = a * x[i] + y[i];
}

__global__ void damp(float* y, const float* x)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) y[i] = 0.5f * y[i] + 0.25f * x[(i + 1) % N];
}

__global__ void dot_partial(const float* x, const float* y, float* part)
{
    __shared__ float s[BS];
    int i = blockIdx.x * BS + threadIdx.x;
    s[threadIdx.x] = x[i] * y[i];
    __syncthreads();
    for (int k = BS / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) part[blockIdx.x] = s[0];
}

__global__ void dot_final(const float* part, float* res, int it)
{
    if (threadIdx.x == 0) {
        float t = 0.0f;
        for (int b = 0; b < NB; ++b) t += part[b];
        res[it] = t;
    }
}

int main()
{
    static float hx[N], hy[N];
    for (int i = 0; i < N; ++i) { hx[i] = (float)(i % 23) * 0.05f; hy[i] = (float)(i % 7) * 0.1f; }
    float *x, *y, *part, *res;
    cudaMalloc(&x, N * 4); cudaMalloc(&y, N * 4);
    cudaMalloc(&part, NB * 4); cudaMalloc(&res, ITERS * 4);
    cudaMemcpy(x, hx, N * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(y, hy, N * 4, cudaMemcpyHostToDevice);
    cudaMemset(res, 0, ITERS * 4);
    cudaDeviceSynchronize();
    for (int it = 0; it < ITERS; ++it) {
        axpy<<<NB, BS>>>(it, x, y);
        cudaDeviceSynchronize();
        damp<<<NB, BS>>>(y, x);
        cudaDeviceSynchronize();
        dot_partial<<<NB, BS>>>(x, y, part);
        cudaDeviceSynchronize();
        dot_final<<<1, 32>>>(part, res, it);
        cudaDeviceSynchronize();
    }
    float hres[ITERS];
    cudaMemcpy(hres, res, sizeof(hres), cudaMemcpyDeviceToHost);
    cudaMemcpy(hy, y, sizeof(hy), cudaMemcpyDeviceToHost);
    double cs = 0;
    for (int i = 0; i < N; ++i) cs += hy[i] * (i % 3 + 1);
    printf("syncall");
    for (int i = 0; i < ITERS; ++i) printf(" %.5f", hres[i]);
    printf(" y %.6f\n", cs);
    cudaFree(x); cudaFree(y); cudaFree(part); cudaFree(res);
    return 0;
}
