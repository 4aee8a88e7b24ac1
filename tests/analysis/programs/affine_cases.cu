// affine_cases.cu -- one kernel per shape of index arithmetic the access analysis must handle
// (tests/analysis/test_access_cases.py states, per kernel, the relation expected).
#include <cuda_runtime.h>

struct Pair {
    float a;
    int b;
    double c;  // at byte 8; sizeof(Pair) = 16
};

// shifts, masks, division and remainder by constants
__global__ void bits(const int* in, int* out)
{
    int t = threadIdx.x;
    out[(t >> 2) * 16 + (t & 3)] = in[t / 3 + (t % 3) * 32 + blockIdx.x * 64];
}

// an affine guard with a modulo: only even i below n store
__global__ void guarded(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && i % 2 == 0)
        y[i / 2] = x[i];
}

// a select between two affine indices
__global__ void choose(const float* x, float* y)
{
    int t = threadIdx.x;
    int j = t < 16 ? t * 2 : t - 16;
    y[t] = x[j];
}

// a struct field and a vector type
__global__ void fields(const Pair* p, double* out, const float4* v, float4* w)
{
    int t = threadIdx.x;
    out[t] = p[t].c;
    w[t] = v[t + 1];
}

// a data-dependent index (inexact: the whole of x)
__global__ void gather(const int* idx, const float* x, float* y)
{
    int t = threadIdx.x;
    y[t] = x[idx[t]];
}

__device__ __noinline__ void touch(float* p, int k)
{
    p[k] = 1.0f;
}

// a __noinline__ call, analysed at its call site: p is a or b by the select, k = t
__global__ void opaque(float* a, float* b)
{
    touch(threadIdx.x < 16 ? a : b, threadIdx.x);
}

// arithmetic LLVM narrows to 8 bits: (t + 250) mod 256
__global__ void narrow(const float* x, float* y)
{
    unsigned char c = (unsigned char)(threadIdx.x + 250);
    y[threadIdx.x] = x[c];
}

// nested loops, the inner one strided by the block size
__global__ void nest(float* a)
{
    for (int i = 0; i < 4; ++i)
        for (int j = threadIdx.x; j < 10; j += blockDim.x)
            a[i * 10 + j] = 0.0f;
}

// dynamic shared memory, reversed through the block
__global__ void reverse(const float* x, float* y)
{
    extern __shared__ float buf[];
    int t = threadIdx.x;
    buf[t] = x[t];
    __syncthreads();
    y[t] = buf[blockDim.x - 1 - t];
}

int main()
{
    int *d_in, *d_out, *d_idx;
    float *d_x, *d_y, *d_w4, *d_v4, *d_a, *d_b;
    Pair* d_p;
    double* d_d;
    cudaMalloc(&d_in, 512 * sizeof(int));
    cudaMalloc(&d_out, 512 * sizeof(int));
    cudaMalloc(&d_idx, 64 * sizeof(int));
    cudaMalloc(&d_x, 1024 * sizeof(float));
    cudaMalloc(&d_y, 1024 * sizeof(float));
    cudaMalloc(&d_p, 64 * sizeof(Pair));
    cudaMalloc(&d_d, 64 * sizeof(double));
    cudaMalloc(&d_v4, 65 * 4 * sizeof(float));
    cudaMalloc(&d_w4, 64 * 4 * sizeof(float));
    cudaMalloc(&d_a, 64 * sizeof(float));
    cudaMalloc(&d_b, 64 * sizeof(float));
    bits<<<2, 64>>>(d_in, d_out);
    guarded<<<2, 64>>>(d_x, d_y, 100);
    choose<<<1, 32>>>(d_x, d_y);
    fields<<<1, 64>>>(d_p, d_d, (const float4*)d_v4, (float4*)d_w4);
    gather<<<1, 64>>>(d_idx, d_x, d_y);
    opaque<<<1, 32>>>(d_a, d_b);
    narrow<<<1, 64>>>(d_x, d_y);
    nest<<<1, 8>>>(d_a);
    reverse<<<1, 64, 64 * sizeof(float)>>>(d_x, d_y);
    cudaDeviceSynchronize();
    return 0;
}
