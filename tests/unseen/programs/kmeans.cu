// Written for sirius's tests by an independent check of the tool on programs it had not seen
// (2026-11-28; tests/unseen/test_unseen.py). Not from any benchmark suite.
// k-means: assignment, per-block per-cluster partial sums (shared-memory tree reduction), centroid update.
#include <cstdio>
#include <cuda_runtime.h>

#define NPTS 4096
#define DIM 2
#define K 4
#define BS 256
#define NBLK (NPTS / BS)
#define ITERS 5

__global__ void assign(const float* pts, const float* cent, int* member)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= NPTS) return;
    float best = 1e30f;
    int bi = 0;
    for (int k = 0; k < K; ++k) {
        float d = 0.0f;
        for (int j = 0; j < DIM; ++j) {
            float v = pts[i * DIM + j] - cent[k * DIM + j];
            d += v * v;
        }
        if (d < best) { best = d; bi = k; }
    }
    member[i] = bi;
}

__global__ void partial_sums(const float* pts, const int* member, float* part)
{
    __shared__ float buf[BS];
    int i = blockIdx.x * BS + threadIdx.x;
    int m = member[i];
    for (int k = 0; k < K; ++k) {
        for (int j = 0; j <= DIM; ++j) {
            float v = 0.0f;
            if (m == k) v = (j < DIM) ? pts[i * DIM + j] : 1.0f;
            buf[threadIdx.x] = v;
            __syncthreads();
            for (int s = BS / 2; s > 0; s >>= 1) {
                if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
                __syncthreads();
            }
            if (threadIdx.x == 0) part[(blockIdx.x * K + k) * (DIM + 1) + j] = buf[0];
            __syncthreads();
        }
    }
}

__global__ void update_centroids(const float* part, float* cent)
{
    int k = threadIdx.x;
    if (k >= K) return;
    float acc[DIM + 1];
    for (int j = 0; j <= DIM; ++j) acc[j] = 0.0f;
    for (int b = 0; b < NBLK; ++b)
        for (int j = 0; j <= DIM; ++j) acc[j] += part[(b * K + k) * (DIM + 1) + j];
    if (acc[DIM] > 0.0f)
        for (int j = 0; j < DIM; ++j) cent[k * DIM + j] = acc[j] / acc[DIM];
}

int main()
{
    static float hp[NPTS * DIM];
    float hc[K * DIM];
    for (int i = 0; i < NPTS; ++i) {
        int g = i % K;
        hp[i * DIM + 0] = (float)(g * 10) + (float)((i * 37) % 100) * 0.03f;
        hp[i * DIM + 1] = (float)(g * -7) + (float)((i * 53) % 100) * 0.04f;
    }
    for (int k = 0; k < K * DIM; ++k) hc[k] = hp[k * 3];
    float *dp, *dc, *dpart;
    int* dm;
    cudaMalloc(&dp, sizeof(hp));
    cudaMalloc(&dc, sizeof(hc));
    cudaMalloc(&dpart, NBLK * K * (DIM + 1) * sizeof(float));
    cudaMalloc(&dm, NPTS * sizeof(int));
    cudaMemcpy(dp, hp, sizeof(hp), cudaMemcpyHostToDevice);
    cudaMemcpy(dc, hc, sizeof(hc), cudaMemcpyHostToDevice);
    for (int it = 0; it < ITERS; ++it) {
        assign<<<NBLK, BS>>>(dp, dc, dm);
        partial_sums<<<NBLK, BS>>>(dp, dm, dpart);
        update_centroids<<<1, 32>>>(dpart, dc);
    }
    static int hm[NPTS];
    cudaMemcpy(hc, dc, sizeof(hc), cudaMemcpyDeviceToHost);
    cudaMemcpy(hm, dm, sizeof(hm), cudaMemcpyDeviceToHost);
    long long ms = 0;
    for (int i = 0; i < NPTS; ++i) ms += hm[i] * (i % 11);
    printf("kmeans");
    for (int k = 0; k < K * DIM; ++k) printf(" %.4f", hc[k]);
    printf(" members %lld\n", ms);
    cudaFree(dp); cudaFree(dc); cudaFree(dpart); cudaFree(dm);
    return 0;
}
