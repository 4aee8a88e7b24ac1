// rebased.cu -- a temp buffer whose second value lives at an offset, for split_storage: d_t
// (2N floats = 8192 bytes) first holds 2N floats (fill, read by pairsum), then its upper half
// is overwritten at d_t + N (fill, which reads nothing of d_t) and read back there (copy_out).
// The second (fill, copy_out) pair reads only what its fill wrote, so it can move to a buffer
// of its own: d_t.v1 covering bytes [4096, 8192) of d_t (4096 is a multiple of 256), with the
// pointer d_t + N rebased to d_t.v1 + 0. That removes the WAR pairsum -> fill and the WAW
// fill -> fill on d_t.
//
// Expected host model: buffers d_x 8192 (input), d_t 8192 (temp), d_o1 4096, d_o2 4096
// (outputs); statements S0 copy H2D d_x; S1 fill<<<8, 256>>>(d_t, d_x, 2.0, 2048);
// S2 pairsum<<<4, 256>>>(d_o1, d_t, 1024); S3 fill<<<4, 256>>>(d_t + 4096, d_x, 3.0, 1024);
// S4 copy_out<<<4, 256>>>(d_o2, d_t + 4096, 1024); S5 sync; S6, S7 copies D2H; frees.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

const int N = 1024;

__global__ void fill(float* t, const float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) t[i] = a * x[i];
}

__global__ void pairsum(float* out, const float* t, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = t[i] + t[i + n];
}

__global__ void copy_out(float* out, const float* t, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = t[i] + 1.0f;
}

int main() {
    float* h_x = (float*)malloc(2 * N * sizeof(float));
    float* h_o1 = (float*)malloc(N * sizeof(float));
    float* h_o2 = (float*)malloc(N * sizeof(float));
    for (int i = 0; i < 2 * N; ++i) h_x[i] = (float)(i % 13) - 6.0f;
    float *d_x, *d_t, *d_o1, *d_o2;
    cudaMalloc(&d_x, 2 * N * sizeof(float));
    cudaMalloc(&d_t, 2 * N * sizeof(float));
    cudaMalloc(&d_o1, N * sizeof(float));
    cudaMalloc(&d_o2, N * sizeof(float));
    cudaMemcpy(d_x, h_x, 2 * N * sizeof(float), cudaMemcpyHostToDevice);
    fill<<<2 * N / 256, 256>>>(d_t, d_x, 2.0f, 2 * N);
    pairsum<<<N / 256, 256>>>(d_o1, d_t, N);
    fill<<<N / 256, 256>>>(d_t + N, d_x, 3.0f, N);
    copy_out<<<N / 256, 256>>>(d_o2, d_t + N, N);
    cudaDeviceSynchronize();
    cudaMemcpy(h_o1, d_o1, N * sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(h_o2, d_o2, N * sizeof(float), cudaMemcpyDeviceToHost);
    printf("%f %f\n", h_o1[0], h_o2[0]);
    cudaFree(d_x);
    cudaFree(d_t);
    cudaFree(d_o1);
    cudaFree(d_o2);
    free(h_x);
    free(h_o1);
    free(h_o2);
    return 0;
}
