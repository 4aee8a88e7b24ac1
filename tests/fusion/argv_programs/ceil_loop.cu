// ceil_loop.cu -- grids from ceil of a float quotient whose dividend is an affine function of
// a host loop variable: n = STEP * t - 3 for t = 1..4 (STEP 1000 by default), grids
// (unsigned)ceil((float)n / block.x) with 96-thread blocks (a float division) and
// (int)ceil(n / 128.0) (a double division, which clang turns into a multiplication by 2^-7).
// |n| < 2^24, so the host model turns them into ceil(n / 96) and ceil(n / 128). The last
// iteration (n = 3997) writes y[0..3997) = 2 x; a grid rounded down would leave a tail.
// -DSTEP=5000000: n reaches 19999997 >= 2^24, where (float)n is not exact: refused (line 35).
#include <cmath>
#include <cuda_runtime.h>

#ifndef STEP
#define STEP 1000
#endif
#define CAP 4000

__global__ void twice(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && i < CAP) y[i] = 2.0f * x[i];
}

int main() {
    float h[CAP];
    for (int i = 0; i < CAP; ++i) h[i] = (float)(i % 13);
    float *dx, *dy, *dz;
    cudaMalloc(&dx, CAP * sizeof(float));
    cudaMalloc(&dy, CAP * sizeof(float));
    cudaMalloc(&dz, CAP * sizeof(float));
    cudaMemcpy(dx, h, sizeof(h), cudaMemcpyHostToDevice);
    cudaMemset(dy, 0, sizeof(h));
    cudaMemset(dz, 0, sizeof(h));
    dim3 block(96);
    for (int t = 1; t <= 4; ++t) {
        int n = STEP * t - 3;
        dim3 grid((unsigned)ceil((float)n / block.x));
        twice<<<grid, block>>>(dx, dy, n);
        twice<<<(int)ceil(n / 128.0), 128>>>(dx, dz, n);
    }
    cudaMemcpy(h, dy, sizeof(h), cudaMemcpyDeviceToHost);
    cudaMemcpy(h, dz, sizeof(h), cudaMemcpyDeviceToHost);
    return 0;
}
