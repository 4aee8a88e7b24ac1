// dyn_shared.cu -- the same kernel launched twice on independent buffers; it uses dynamic shared
// memory (extern __shared__, 512 bytes per launch), a static __shared__ counter and two
// barriers. Fused vertically, each member needs its own dynamic area (offsets 0 and 512) and
// its own counter; fused horizontally, the two may overlay (one member per block).
//
// reverse_dyn, 4 blocks of 64 threads: out[i] = the block's values reversed,
// out2[i] = twice the next value in the block + the counter every thread incremented (64).
#include <cuda_runtime.h>

#define BLOCK 64
#define NB 4
#define N (BLOCK * NB)

__global__ void reverse_dyn(const float* in, float* out, float* out2) {
    extern __shared__ float buf[];
    __shared__ int count;
    int t = threadIdx.x;
    int i = blockIdx.x * blockDim.x + t;
    if (t == 0) count = 0;
    buf[t] = in[i];
    buf[blockDim.x + t] = 2.0f * in[i];
    __syncthreads();
    atomicAdd(&count, 1);
    __syncthreads();
    out[i] = buf[blockDim.x - 1 - t];
    out2[i] = buf[blockDim.x + (t + 1) % blockDim.x] + (float)count;
}

int main() {
    float *d_in, *d_in2, *d_out, *d_out2, *d_out3, *d_out4;
    cudaMalloc(&d_in, N * sizeof(float));
    cudaMalloc(&d_in2, N * sizeof(float));
    cudaMalloc(&d_out, N * sizeof(float));
    cudaMalloc(&d_out2, N * sizeof(float));
    cudaMalloc(&d_out3, N * sizeof(float));
    cudaMalloc(&d_out4, N * sizeof(float));
    size_t smem = 2 * BLOCK * sizeof(float);
    reverse_dyn<<<NB, BLOCK, smem>>>(d_in, d_out, d_out2);
    reverse_dyn<<<NB, BLOCK, smem>>>(d_in2, d_out3, d_out4);
    cudaDeviceSynchronize();
    cudaFree(d_in);
    cudaFree(d_in2);
    cudaFree(d_out);
    cudaFree(d_out2);
    cudaFree(d_out3);
    cudaFree(d_out4);
    return 0;
}
