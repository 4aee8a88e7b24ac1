#include <cuda_runtime.h>
#define N 4096
__global__ void twice(const float* x, float* y) { int i = blockIdx.x * 256 + threadIdx.x; y[i] = 2.0f * x[i]; }
__global__ void plus1(const float* x, float* y) { int i = blockIdx.x * 256 + threadIdx.x; y[i] = x[i] + 1.0f; }
__global__ void square(const float* x, float* y) { int i = blockIdx.x * 256 + threadIdx.x; y[i] = x[i] * x[i]; }
int main()
{
    static float h[N];
    for (int i = 0; i < N; i++) h[i] = 0.5f * (i % 13);
    float *x, *t, *y, *u, *v, *w, *z;
    cudaMalloc(&x, N * 4); cudaMalloc(&t, N * 4); cudaMalloc(&y, N * 4); cudaMalloc(&u, N * 4);
    cudaMalloc(&v, N * 4); cudaMalloc(&w, N * 4); cudaMalloc(&z, N * 4);
    cudaMemcpy(x, h, N * 4, cudaMemcpyHostToDevice);
    twice<<<N / 256, 256>>>(x, t);   // a vertical pair
    plus1<<<N / 256, 256>>>(t, y);
    cudaMemcpy(h, y, N * 4, cudaMemcpyDeviceToHost);
    square<<<N / 256, 256>>>(x, u);  // two independent launches: horizontal, original members
    plus1<<<N / 256, 256>>>(x, v);
    cudaMemcpy(h, u, N * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(h, v, N * 4, cudaMemcpyDeviceToHost);
    twice<<<N / 256, 256>>>(y, w);   // a vertical pair beside an independent launch: mixed
    square<<<N / 256, 256>>>(w, z);
    plus1<<<N / 256, 256>>>(u, t);
    cudaMemcpy(h, z, N * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(h, t, N * 4, cudaMemcpyDeviceToHost);
    return 0;
}
