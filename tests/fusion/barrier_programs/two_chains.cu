#include <cuda_runtime.h>
#define N 1024
#define T 128
// two independent chains, A -> B and C -> D; each consumer reads a neighbour's element within
// its block, so each dependence is BLOCK-wide (a block barrier must separate the two launches).
// With -DONE_CHAIN, C reads B's output instead: one chain A -> B -> C -> D.
__global__ void scale_a(const float *x, float *a) {
    int i = blockIdx.x * T + threadIdx.x;
    a[i] = x[i] * 2.0f;
}
__global__ void shift_b(const float *a, float *b) {
    int t = threadIdx.x, base = blockIdx.x * T;
    b[base + t] = a[base + (t + 1) % T] + 1.0f;
}
__global__ void scale_c(const float *y, float *c) {
    int i = blockIdx.x * T + threadIdx.x;
    c[i] = y[i] * 3.0f;
}
__global__ void shift_d(const float *c, float *d) {
    int t = threadIdx.x, base = blockIdx.x * T;
    d[base + t] = c[base + (t + T - 1) % T] - 1.0f;
}
int main() {
    float *x, *y, *a, *b, *c, *d;
    cudaMalloc(&x, N * sizeof(float));
    cudaMalloc(&y, N * sizeof(float));
    cudaMalloc(&a, N * sizeof(float));
    cudaMalloc(&b, N * sizeof(float));
    cudaMalloc(&c, N * sizeof(float));
    cudaMalloc(&d, N * sizeof(float));
    scale_a<<<N / T, T>>>(x, a);
    shift_b<<<N / T, T>>>(a, b);
#ifdef ONE_CHAIN
    scale_c<<<N / T, T>>>(b, c);
#else
    scale_c<<<N / T, T>>>(y, c);
#endif
    shift_d<<<N / T, T>>>(c, d);
    float out[2 * N];
    cudaMemcpy(out, b, N * sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(out + N, d, N * sizeof(float), cudaMemcpyDeviceToHost);
    return 0;
}
