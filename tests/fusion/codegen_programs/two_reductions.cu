// two_reductions.cu -- two INDEPENDENT launches with different block sizes, for the code
// generator's counted-barrier case: a block-wise tree sum (128 threads per block, a 128-float
// shared array, a __syncthreads_count before the tree -- it also counts the positive inputs --
// and a __syncthreads per tree level) and an elementwise square (256 threads per block). Fused
// into 256-thread blocks, the sum runs on half of each block's threads, so its barriers must
// become counted ones (barrier.sync id, 128 and barrier.red.popc id, 128).
//
// Expected host model: buffers d_a 16384, d_sums 128, d_pos 128, d_x 16384, d_y 16384 bytes;
// copies H2D d_a, d_x; launches block_sum grid (32,1,1) block (128,1,1) args (d_a, d_sums,
// d_pos, 4096) and square grid (16,1,1) block (256,1,1) args (d_x, d_y, 4096); sync; copies
// D2H; frees.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

const int N = 4096;

__global__ void block_sum(const float* in, float* sums, int* positive, int n) {
    __shared__ float part[128];
    int t = threadIdx.x;
    int i = blockIdx.x * blockDim.x + t;
    part[t] = i < n ? in[i] : 0.0f;
    int pos = __syncthreads_count(part[t] > 0.0f);
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) part[t] += part[t + s];
        __syncthreads();
    }
    if (t == 0) {
        sums[blockIdx.x] = part[0];
        positive[blockIdx.x] = pos;
    }
}

__global__ void square(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * x[i];
}

int main() {
    const size_t bytes = N * sizeof(float);
    float* h_a = (float*)malloc(bytes);
    float* h_x = (float*)malloc(bytes);
    float* h_y = (float*)malloc(bytes);
    float* h_sums = (float*)malloc(32 * sizeof(float));
    for (int i = 0; i < N; ++i) {
        h_a[i] = (float)(i % 7);
        h_x[i] = (float)(i % 5) - 2.0f;
    }
    float *d_a, *d_sums, *d_x, *d_y;
    int* d_pos;
    cudaMalloc(&d_a, bytes);
    cudaMalloc(&d_sums, 32 * sizeof(float));
    cudaMalloc(&d_pos, 32 * sizeof(int));
    cudaMalloc(&d_x, bytes);
    cudaMalloc(&d_y, bytes);
    cudaMemcpy(d_a, h_a, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(d_x, h_x, bytes, cudaMemcpyHostToDevice);
    block_sum<<<N / 128, 128>>>(d_a, d_sums, d_pos, N);
    square<<<N / 256, 256>>>(d_x, d_y, N);
    cudaDeviceSynchronize();
    cudaMemcpy(h_sums, d_sums, 32 * sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(h_y, d_y, bytes, cudaMemcpyDeviceToHost);
    printf("%f %f\n", h_sums[0], h_y[1]);
    cudaFree(d_a);
    cudaFree(d_sums);
    cudaFree(d_pos);
    cudaFree(d_x);
    cudaFree(d_y);
    free(h_a);
    free(h_x);
    free(h_y);
    free(h_sums);
    return 0;
}
