// Written for sirius's tests by an independent check of the tool on programs it had not seen
// (2026-11-28; tests/unseen/test_unseen.py). Not from any benchmark suite.
// LU-like decomposition without pivoting using pointer offsets into the matrix in a host loop,
// shrinking 2-D grids, a __noinline__ device helper and a 3-D block for a final kernel.
#include <cstdio>
#include <cuda_runtime.h>

#define N 48
#define B 16

__device__ __noinline__ float mulsub(float a, float b, float c) { return a - b * c; }

// column below the pivot: l[i] = col[i*N] / pivot
__global__ void scale_col(float* diag, int rem)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x + 1;
    if (i <= rem) diag[i * N] = diag[i * N] / diag[0];
}

// trailing submatrix update: sub[i][j] -= l[i] * u[j], sub starts at diag + N + 1
__global__ void trail(float* diag, int rem)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x + 1;
    int i = blockIdx.y * blockDim.y + threadIdx.y + 1;
    if (i <= rem && j <= rem) diag[i * N + j] = mulsub(diag[i * N + j], diag[i * N], diag[j]);
}

__global__ void norm3(const float* m, float* out)
{
    int x = threadIdx.x, y = threadIdx.y, z = threadIdx.z;
    int r = blockIdx.x * 4 + z * 2 + y;   // 4 rows per block
    if (r < N && x < 16) {
        float s = 0.0f;
        for (int c = x; c < N; c += 16) s += fabsf(m[r * N + c]);
        out[r * 16 + x] = s;
    }
}

int main()
{
    static float h[N * N], ho[N * 16];
    for (int r = 0; r < N; ++r)
        for (int c = 0; c < N; ++c)
            h[r * N + c] = (r == c) ? (float)(2 * N) : (float)((r * 7 + c * 3) % 9) * 0.1f;
    float *m, *o;
    cudaMalloc(&m, sizeof(h));
    cudaMalloc(&o, sizeof(ho));
    cudaMemcpy(m, h, sizeof(h), cudaMemcpyHostToDevice);
    for (int t = 0; t < N - 1; ++t) {
        int rem = N - 1 - t;
        float* diag = m + t * N + t;
        scale_col<<<(rem + B - 1) / B, B>>>(diag, rem);
        dim3 g((rem + B - 1) / B, (rem + B - 1) / B);
        trail<<<g, dim3(B, B)>>>(diag, rem);
    }
    norm3<<<N / 4, dim3(16, 2, 2)>>>(m, o);
    cudaMemcpy(h, m, sizeof(h), cudaMemcpyDeviceToHost);
    cudaMemcpy(ho, o, sizeof(ho), cudaMemcpyDeviceToHost);
    double cs = 0;
    for (int i = 0; i < N * N; ++i) cs += h[i] * (i % 5 + 1);
    for (int i = 0; i < N * 16; ++i) cs += ho[i];
    printf("lud checksum %.6f\n", cs);
    cudaFree(m); cudaFree(o);
    return 0;
}
