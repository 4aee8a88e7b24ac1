// A layer y = relu(W^T-stored x + 2b), as a framework export might write it: the weight
// transpose and the bias scaling compute only from the parameters d_w and d_b (the one-time
// prepare part); the matrix-vector product and the relu run per inference.
// -DLOOPED puts the bias scaling inside a host loop (so it is no prepare launch);
// -DBIAS_FROM_X makes the bias scaling read the input too (so it is none either);
// -DREUPLOAD copies W again after the transpose (so the transpose is none).
#include <cstdio>
#include <cuda_runtime.h>

#define N 256

__global__ void transpose(float *wt, const float *w) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N * N) wt[(i % N) * N + i / N] = w[i];
}

__global__ void scale_bias(float *b2, const float *b, const float *x) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
#ifdef BIAS_FROM_X
    if (i < N) b2[i] = 2.0f * b[i] + 0.0f * x[i];
#else
    if (i < N) b2[i] = 2.0f * b[i];
#endif
}

__global__ void matvec(float *y, const float *wt, const float *x, const float *b2) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < N) {
        float s = b2[r];
        for (int k = 0; k < N; ++k) s += wt[r * N + k] * x[k];
        y[r] = s;
    }
}

__global__ void relu(float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
}

int main() {
    static float h_w[N * N], h_b[N], h_x[N], h_y[N];
    for (int i = 0; i < N * N; ++i) h_w[i] = (float)((i * 37) % 101 - 50) / 100.0f;
    for (int i = 0; i < N; ++i) { h_b[i] = (float)(i % 13) - 6.0f; h_x[i] = (float)(i % 7) - 3.0f; }
    float *d_w, *d_b, *d_x, *d_wt, *d_b2, *d_y;
    cudaMalloc(&d_w, sizeof h_w);
    cudaMalloc(&d_b, sizeof h_b);
    cudaMalloc(&d_x, sizeof h_x);
    cudaMalloc(&d_wt, sizeof h_w);
    cudaMalloc(&d_b2, sizeof h_b);
    cudaMalloc(&d_y, sizeof h_y);
    cudaMemcpy(d_w, h_w, sizeof h_w, cudaMemcpyHostToDevice);
    cudaMemcpy(d_b, h_b, sizeof h_b, cudaMemcpyHostToDevice);
    cudaMemcpy(d_x, h_x, sizeof h_x, cudaMemcpyHostToDevice);
    transpose<<<N * N / 256, 256>>>(d_wt, d_w);
#ifdef REUPLOAD
    cudaMemcpy(d_w, h_w, sizeof h_w, cudaMemcpyHostToDevice);  // W uploaded again
#endif
#ifdef LOOPED
    for (int t = 0; t < 3; ++t)
#endif
    scale_bias<<<1, N>>>(d_b2, d_b, d_x);
    matvec<<<N / 64, 64>>>(d_y, d_wt, d_x, d_b2);
    relu<<<1, N>>>(d_y);
    cudaMemcpy(h_y, d_y, sizeof h_y, cudaMemcpyDeviceToHost);
    printf("%f\n", h_y[0]);
    return 0;
}
