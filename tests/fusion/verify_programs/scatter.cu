// scatter.cu -- an order-dependent original: a scatter whose indices collide.
//
// Each block of 256 threads stores v[i] to one of its own 64 cells, out[64 * block + idx[i] % 64]:
// with the seeded random indices about four threads store to each cell, and which one lands
// last depends on the order the threads run in (forward: the highest i, reverse: the lowest).
// Blocks write disjoint cells, so running blocks in parallel changes nothing. There is nothing
// else in the program, so nothing is fused: verification must report the original as
// order-dependent in `out`, not blame a fusion.

#include <cuda_runtime.h>

#define N 4096
#define CELLS 64
#define M (N / 256 * CELLS)

__global__ void scatter(const unsigned* idx, const float* v, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[blockIdx.x * CELLS + idx[i] % CELLS] = v[i];
}

int main()
{
    static unsigned hidx[N];
    static float hv[N], hout[M];
    unsigned* idx;
    float *v, *out;
    cudaMalloc(&idx, N * sizeof(unsigned));
    cudaMalloc(&v, N * sizeof(float));
    cudaMalloc(&out, M * sizeof(float));
    cudaMemcpy(idx, hidx, N * sizeof(unsigned), cudaMemcpyHostToDevice);
    cudaMemcpy(v, hv, N * sizeof(float), cudaMemcpyHostToDevice);
    scatter<<<N / 256, 256>>>(idx, v, out, N);
    cudaMemcpy(hout, out, M * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(idx);
    cudaFree(v);
    cudaFree(out);
    return 0;
}
