// Written for sirius's tests by an independent check of the tool on programs it had not seen
// (2026-11-28; tests/unseen/test_unseen.py). Not from any benchmark suite.
// Mixed: dynamic shared memory, producer/consumer with different block sizes, D2D copy and memset
// between launches, a host loop whose grid shrinks with the loop variable.
#include <cstdio>
#include <cuda_runtime.h>

#define N 8192

struct Coef { float a; float b; int shift; };

__global__ void prod(const float* in, float* out, float ca, float cb, int shift)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) out[i] = ca * in[(i + shift) % N] + cb;
}

__global__ void smooth_dyn(const float* in, float* out, int n)
{
    extern __shared__ float sh[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    sh[threadIdx.x] = (i < n) ? in[i] : 0.0f;
    __syncthreads();
    float l = threadIdx.x > 0 ? sh[threadIdx.x - 1] : sh[threadIdx.x];
    float r = threadIdx.x + 1 < blockDim.x ? sh[threadIdx.x + 1] : sh[threadIdx.x];
    if (i < n) out[i] = 0.25f * l + 0.5f * sh[threadIdx.x] + 0.25f * r;
}

__global__ void warp_sum(const float* in, float* out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = in[i];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) out[i / 32] = v;
}

__global__ void tail_scale(float* a, int start, float s)
{
    int i = start + blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) a[i] = a[i] * s + 1.0f;
}

int main()
{
    static float h[N];
    for (int i = 0; i < N; ++i) h[i] = (float)((i * 19) % 53) * 0.1f;
    float *a, *b, *c, *w;
    cudaMalloc(&a, N * 4); cudaMalloc(&b, N * 4); cudaMalloc(&c, N * 4); cudaMalloc(&w, N / 32 * 4);
    cudaMemcpy(a, h, N * 4, cudaMemcpyHostToDevice);
    Coef k = {1.5f, -0.25f, 3};
    prod<<<N / 256, 256>>>(a, b, k.a, k.b, k.shift);
    smooth_dyn<<<N / 128, 128, 128 * sizeof(float)>>>(b, c, N);
    smooth_dyn<<<N / 512, 512, 512 * sizeof(float)>>>(c, b, N);
    cudaMemcpy(a, b, N * 4, cudaMemcpyDeviceToDevice);
    cudaMemset(c, 0, N * 4);
    prod<<<N / 64, 64>>>(a, c, 0.5f, 2.0f, N - 1);
    warp_sum<<<N / 256, 256>>>(c, w);
    for (int t = 0; t < 8; ++t) {
        int start = t * 1024;
        tail_scale<<<(N - start + 255) / 256, 256>>>(b, start, 0.9f);
    }
    static float hb[N], hw[N / 32];
    cudaMemcpy(hb, b, N * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(hw, w, N / 32 * 4, cudaMemcpyDeviceToHost);
    double cs = 0;
    for (int i = 0; i < N; ++i) cs += hb[i] * (i % 9 + 1);
    for (int i = 0; i < N / 32; ++i) cs += hw[i] * (i % 4 + 1);
    printf("mixed checksum %.6f\n", cs);
    cudaFree(a); cudaFree(b); cudaFree(c); cudaFree(w);
    return 0;
}
