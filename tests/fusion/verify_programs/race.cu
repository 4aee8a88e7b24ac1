// race.cu -- an order-dependent original: two threads store different values to one cell.
//
// `race` is launched with one block; threads 0 and 1 both store to cell[0] (1 and 2): the last
// one to run wins, so forward order leaves 2 and reverse order leaves 1. The rest of the program
// is a deterministic chain (scale -> shift on y and z) that sirius fuses. Verification must say
// that the original is order-dependent in `cell` and must not blame the fusion: `z` agrees.

#include <cuda_runtime.h>

#define N 4096

__global__ void race(int* cell)
{
    int i = threadIdx.x;
    if (i < 2)
        cell[0] = i + 1;
}

__global__ void scale(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = x[i] * 3.0f;
}

__global__ void shift(const float* y, float* z, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        z[i] = y[i] + 1.0f;
}

int main()
{
    static float hx[N], hz[N];
    static int hcell[1];
    float *x, *y, *z;
    int* cell;
    cudaMalloc(&x, N * sizeof(float));
    cudaMalloc(&y, N * sizeof(float));
    cudaMalloc(&z, N * sizeof(float));
    cudaMalloc(&cell, sizeof(int));
    cudaMemcpy(x, hx, N * sizeof(float), cudaMemcpyHostToDevice);
    race<<<1, 32>>>(cell);
    scale<<<N / 256, 256>>>(x, y, N);
    shift<<<N / 256, 256>>>(y, z, N);
    cudaMemcpy(hz, z, N * sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(hcell, cell, sizeof(int), cudaMemcpyDeviceToHost);
    cudaFree(x);
    cudaFree(y);
    cudaFree(z);
    cudaFree(cell);
    return 0;
}
