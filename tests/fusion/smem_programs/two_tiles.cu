#include <cuda_runtime.h>
#define N 1024
#define T 128
// each block reverses its tile of a (through shared memory), then rotates its tile of b by one
__global__ void reverse_tile(const float *a, float *b) {
    __shared__ float s[T];
    int t = threadIdx.x, i = blockIdx.x * T + t;
    s[t] = a[i] * 2.0f;
    __syncthreads();
    b[i] = s[T - 1 - t] + 1.0f;
}
__global__ void rotate_tile(const float *b, float *c) {
    __shared__ float s[T];
    int t = threadIdx.x, i = blockIdx.x * T + t;
    s[t] = b[i] * 3.0f;
    __syncthreads();
    c[i] = s[(t + 1) % T] - b[i];
}
int main() {
    float *a, *b, *c;
    cudaMalloc(&a, N * sizeof(float));
    cudaMalloc(&b, N * sizeof(float));
    cudaMalloc(&c, N * sizeof(float));
    reverse_tile<<<N / T, T>>>(a, b);
    rotate_tile<<<N / T, T>>>(b, c);
    float out[N];
    cudaMemcpy(out, c, sizeof out, cudaMemcpyDeviceToHost);
    return 0;
}
