// Written for sirius's tests by an independent check of the tool on programs it had not seen
// (2026-11-28; tests/unseen/test_unseen.py). Not from any benchmark suite.
// Two-layer MLP: tiled matmul, bias + relu, tiled matmul, bias.
#include <cstdio>
#include <cuda_runtime.h>

#define B 64
#define IN 96
#define HID 128
#define OUT 32
#define T 16

// C[m][n] = sum_k A[m][k] * Bm[k][n]; all dims multiples of T
__global__ void matmul(const float* A, const float* Bm, float* C, int M, int N, int Kd)
{
    __shared__ float sa[T][T];
    __shared__ float sb[T][T];
    int row = blockIdx.y * T + threadIdx.y;
    int col = blockIdx.x * T + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < Kd; k0 += T) {
        sa[threadIdx.y][threadIdx.x] = A[row * Kd + k0 + threadIdx.x];
        sb[threadIdx.y][threadIdx.x] = Bm[(k0 + threadIdx.y) * N + col];
        __syncthreads();
        for (int k = 0; k < T; ++k) acc += sa[threadIdx.y][k] * sb[k][threadIdx.x];
        __syncthreads();
    }
    C[row * N + col] = acc;
}

__global__ void bias_relu(float* X, const float* bias, int M, int N)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= M * N) return;
    float v = X[i] + bias[i % N];
    X[i] = v > 0.0f ? v : 0.0f;
}

__global__ void bias_only(float* X, const float* bias, int M, int N)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < M * N) X[i] += bias[i % N];
}

int main()
{
    static float hx[B * IN], hw1[IN * HID], hb1[HID], hw2[HID * OUT], hb2[OUT], hy[B * OUT];
    for (int i = 0; i < B * IN; ++i) hx[i] = (float)((i * 7) % 31) / 31.0f - 0.4f;
    for (int i = 0; i < IN * HID; ++i) hw1[i] = (float)((i * 13) % 37 - 18) / 90.0f;
    for (int i = 0; i < HID; ++i) hb1[i] = (float)(i % 5) * 0.02f - 0.04f;
    for (int i = 0; i < HID * OUT; ++i) hw2[i] = (float)((i * 11) % 29 - 14) / 70.0f;
    for (int i = 0; i < OUT; ++i) hb2[i] = (float)i * 0.01f;
    float *x, *w1, *b1, *w2, *b2, *h, *y;
    cudaMalloc(&x, sizeof(hx)); cudaMalloc(&w1, sizeof(hw1)); cudaMalloc(&b1, sizeof(hb1));
    cudaMalloc(&w2, sizeof(hw2)); cudaMalloc(&b2, sizeof(hb2));
    cudaMalloc(&h, B * HID * 4); cudaMalloc(&y, sizeof(hy));
    cudaMemcpy(x, hx, sizeof(hx), cudaMemcpyHostToDevice);
    cudaMemcpy(w1, hw1, sizeof(hw1), cudaMemcpyHostToDevice);
    cudaMemcpy(b1, hb1, sizeof(hb1), cudaMemcpyHostToDevice);
    cudaMemcpy(w2, hw2, sizeof(hw2), cudaMemcpyHostToDevice);
    cudaMemcpy(b2, hb2, sizeof(hb2), cudaMemcpyHostToDevice);
    dim3 blk(T, T);
    matmul<<<dim3(HID / T, B / T), blk>>>(x, w1, h, B, HID, IN);
    bias_relu<<<(B * HID + 255) / 256, 256>>>(h, b1, B, HID);
    matmul<<<dim3(OUT / T, B / T), blk>>>(h, w2, y, B, OUT, HID);
    bias_only<<<(B * OUT + 127) / 128, 128>>>(y, b2, B, OUT);
    cudaMemcpy(hy, y, sizeof(hy), cudaMemcpyDeviceToHost);
    double cs = 0;
    for (int i = 0; i < B * OUT; ++i) cs += hy[i] * ((i % 7) + 1);
    printf("mlp checksum %.6f\n", cs);
    cudaFree(x); cudaFree(w1); cudaFree(b1); cudaFree(w2); cudaFree(b2); cudaFree(h); cudaFree(y);
    return 0;
}
