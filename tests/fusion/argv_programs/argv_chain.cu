// argv_chain.cu -- sized from the command line: `prog N SCALE`. N floats, a grid written
// (unsigned)ceil((float)n / block.x) with 96-thread blocks, and two elementwise launches
// (y = SCALE * x, then y = y + 1) that fuse vertically. With --args "1000 2.5" the host model
// is specialised: buffers of 4000 bytes, grid ceil(1000 / 96) = 11, SCALE 2.5f.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void scale(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}

__global__ void add_one(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = y[i] + 1.0f;
}

int main(int argc, char** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s N SCALE\n", argv[0]);
        return 1;
    }
    int n = atoi(argv[1]);
    float a = (float)atof(argv[2]);
    size_t bytes = n * sizeof(float);
    float* h = (float*)malloc(bytes);
    for (int i = 0; i < n; ++i) h[i] = (float)i;
    float *dx, *dy;
    cudaMalloc(&dx, bytes);
    cudaMalloc(&dy, bytes);
    cudaMemcpy(dx, h, bytes, cudaMemcpyHostToDevice);
    dim3 block(96);
    dim3 grid((unsigned)ceil((float)n / block.x));
    scale<<<grid, block>>>(dx, dy, a, n);
    cudaDeviceSynchronize();
    add_one<<<grid, block>>>(dy, n);
    cudaDeviceSynchronize();
    cudaMemcpy(h, dy, bytes, cudaMemcpyDeviceToHost);
    printf("y[1] = %f\n", h[1]);
    cudaFree(dx);
    cudaFree(dy);
    free(h);
    return 0;
}
