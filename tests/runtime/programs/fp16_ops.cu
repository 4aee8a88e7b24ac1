// fp16_ops.cu -- half arithmetic from cuda_fp16.h (inline PTX, lifted by the CPU executor).
//
// half_ops: for i < n (256 threads, 2 blocks of 128) with x, y half inputs and f a float input,
//   out[0n+i] = x + y          (__hadd)        out[1n+i] = x * y        (__hmul)
//   out[2n+i] = x - y          (__hsub)        out[3n+i] = -|x|         (__hneg(__habs))
//   out[4n+i] = max(x, y)      (__hmax)        out[5n+i] = (half)f      (__float2half_rn)
//   out[6n+i] = x < y ? 1 : 0  (__hlt)         out[7n+i] = x' + y'      (x', y': lane i^1's x, y,
//                                                through __shfl_xor_sync on a packed half2)
//   g[i] = (float)x + (float)y (__half2float, in float)
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define N 256
#define BLOCK 128

__global__ void half_ops(const __half* x, const __half* y, const float* f, __half* out, float* g,
                         int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    __half a = x[i], b = y[i];
    __half2 p = __shfl_xor_sync(0xffffffffu, __halves2half2(a, b), 1);
    if (i < n) {
        out[0 * n + i] = __hadd(a, b);
        out[1 * n + i] = __hmul(a, b);
        out[2 * n + i] = __hsub(a, b);
        out[3 * n + i] = __hneg(__habs(a));
        out[4 * n + i] = __hmax(a, b);
        out[5 * n + i] = __float2half_rn(f[i]);
        out[6 * n + i] = __hlt(a, b) ? __float2half(1.0f) : __float2half(0.0f);
        out[7 * n + i] = __hadd(__low2half(p), __high2half(p));
        g[i] = __half2float(a) + __half2float(b);
    }
}

int main()
{
    __half *d_x, *d_y, *d_out;
    float *d_f, *d_g;
    cudaMalloc(&d_x, N * sizeof(__half));
    cudaMalloc(&d_y, N * sizeof(__half));
    cudaMalloc(&d_f, N * sizeof(float));
    cudaMalloc(&d_out, 8 * N * sizeof(__half));
    cudaMalloc(&d_g, N * sizeof(float));
    half_ops<<<N / BLOCK, BLOCK>>>(d_x, d_y, d_f, d_out, d_g, N);
    cudaDeviceSynchronize();
    cudaFree(d_x);
    cudaFree(d_y);
    cudaFree(d_f);
    cudaFree(d_out);
    cudaFree(d_g);
    return 0;
}
