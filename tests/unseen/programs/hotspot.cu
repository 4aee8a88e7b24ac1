// Written for sirius's tests by an independent check of the tool on programs it had not seen
// (2026-11-28; tests/unseen/test_unseen.py). Not from any benchmark suite.
// 2-D heat diffusion with a power map, ping-pong buffers, host loop of steps.
#include <cstdio>
#include <cuda_runtime.h>

#define ROWS 64
#define COLS 64
#define STEPS 12
#define TB 16

__global__ void heat_step(const float* power, const float* src, float* dst,
                          int rows, int cols, float cap, float rx, float ry, float rz, float amb)
{
    int c = blockIdx.x * TB + threadIdx.x;
    int r = blockIdx.y * TB + threadIdx.y;
    if (r >= rows || c >= cols) return;
    int idx = r * cols + c;
    int n = (r == 0) ? idx : idx - cols;
    int s = (r == rows - 1) ? idx : idx + cols;
    int w = (c == 0) ? idx : idx - 1;
    int e = (c == cols - 1) ? idx : idx + 1;
    float t = src[idx];
    float d = cap * (power[idx] + (src[n] + src[s] - 2.0f * t) * ry
                     + (src[e] + src[w] - 2.0f * t) * rx + (amb - t) * rz);
    dst[idx] = t + d;
}

int main()
{
    const int n = ROWS * COLS;
    size_t bytes = n * sizeof(float);
    float* h_temp = (float*)malloc(bytes);
    float* h_power = (float*)malloc(bytes);
    for (int i = 0; i < n; ++i) {
        h_temp[i] = 320.0f + (float)((i * 13) % 29) * 0.5f;
        h_power[i] = (float)((i * 7) % 11) * 0.01f;
    }
    float *d_power, *d_a, *d_b;
    cudaMalloc(&d_power, bytes);
    cudaMalloc(&d_a, bytes);
    cudaMalloc(&d_b, bytes);
    cudaMemcpy(d_power, h_power, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(d_a, h_temp, bytes, cudaMemcpyHostToDevice);
    dim3 block(TB, TB);
    dim3 grid((COLS + TB - 1) / TB, (ROWS + TB - 1) / TB);
    float* src = d_a;
    float* dst = d_b;
    for (int it = 0; it < STEPS; ++it) {
        heat_step<<<grid, block>>>(d_power, src, dst, ROWS, COLS, 0.5f, 0.1f, 0.1f, 0.01f, 300.0f);
        float* tmp = src; src = dst; dst = tmp;
    }
    cudaMemcpy(h_temp, src, bytes, cudaMemcpyDeviceToHost);
    double sum = 0.0;
    for (int i = 0; i < n; ++i) sum += h_temp[i] * (double)((i % 17) + 1);
    printf("hotspot checksum %.6f\n", sum);
    cudaFree(d_power); cudaFree(d_a); cudaFree(d_b);
    free(h_temp); free(h_power);
    return 0;
}
