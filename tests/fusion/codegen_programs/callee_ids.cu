// callee_ids.cu -- kernels that read their thread ids inside a __noinline__ device function, so
// the code generator must inline the callee into the fragment before it can replace the sreg
// reads. Two elementwise launches with different block sizes (128 and 96 threads), aligned on the
// global linear thread id when fused.
#include <cuda_runtime.h>

const int N = 1000;

__device__ __noinline__ int global_id() { return blockIdx.x * blockDim.x + threadIdx.x; }

__global__ void twice(const float* x, float* y, int n) {
    int i = global_id();
    if (i < n) y[i] = 2.0f * x[i] + (float)threadIdx.x;
}

__global__ void plus_block(const float* y, float* z, int n) {
    int i = global_id();
    if (i < n) z[i] = y[i] + (float)blockIdx.x;
}

int main() {
    float *d_x, *d_y, *d_z;
    cudaMalloc(&d_x, N * sizeof(float));
    cudaMalloc(&d_y, N * sizeof(float));
    cudaMalloc(&d_z, N * sizeof(float));
    twice<<<(N + 127) / 128, 128>>>(d_x, d_y, N);
    plus_block<<<(N + 95) / 96, 96>>>(d_y, d_z, N);
    cudaDeviceSynchronize();
    cudaFree(d_x);
    cudaFree(d_y);
    cudaFree(d_z);
    return 0;
}
