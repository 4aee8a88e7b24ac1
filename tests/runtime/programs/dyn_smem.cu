// dyn_smem.cu -- dynamic shared memory (extern __shared__ + the third launch parameter) next to
// a static __shared__ variable.
//
// 4 blocks of 64 threads, n = 256 floats, 2 * 64 * 4 = 512 bytes of dynamic shared memory.
// buf[0 .. 64) holds the block's values, buf[64 .. 128) twice the values; after the barrier
//   out[i]  = buf[63 - t]                       (the block's values reversed)
//   out2[i] = buf[64 + (t + 1) % 64] + count    (the doubled neighbour, plus the static counter,
//                                                which every thread incremented: 64)
#include <cuda_runtime.h>

#define BLOCK 64
#define NB 4
#define N (BLOCK * NB)

__global__ void reverse_dyn(const float* in, float* out, float* out2)
{
    extern __shared__ float buf[];
    __shared__ int count;
    int t = threadIdx.x;
    int i = blockIdx.x * blockDim.x + t;
    if (t == 0)
        count = 0;
    buf[t] = in[i];
    buf[blockDim.x + t] = 2.0f * in[i];
    __syncthreads();
    atomicAdd(&count, 1);
    __syncthreads();
    out[i] = buf[blockDim.x - 1 - t];
    out2[i] = buf[blockDim.x + (t + 1) % blockDim.x] + (float)count;
}

int main()
{
    float *d_in, *d_out, *d_out2;
    float h_in[N];
    for (int i = 0; i < N; ++i)
        h_in[i] = (float)i;
    cudaMalloc(&d_in, N * sizeof(float));
    cudaMalloc(&d_out, N * sizeof(float));
    cudaMalloc(&d_out2, N * sizeof(float));
    cudaMemcpy(d_in, h_in, N * sizeof(float), cudaMemcpyHostToDevice);
    size_t smem = 2 * BLOCK * sizeof(float);
    reverse_dyn<<<NB, BLOCK, smem>>>(d_in, d_out, d_out2);
    cudaDeviceSynchronize();
    cudaFree(d_in);
    cudaFree(d_out);
    cudaFree(d_out2);
    return 0;
}
