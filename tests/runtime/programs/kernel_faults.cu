// kernel_faults.cu -- PLANTED BUGS: faults a CPU traps on, picked by d_mode[0] (default input:
// a random 0..127, no fault for most values; the tests give it).
//
// Thread 37 (block 0, thread 37) of `faulty` (fast path) or `faulty_fibers` (same body after a
// __syncthreads: fiber path) does, for mode M (fibers: M + 10):
//   1: a store 32 KiB past the start of d_out (1024 floats): into the no-access region
//   2: an integer division by d_div[0] (the tests give 0)
//   3: __trap()
//   4: unbounded recursion (1 KiB of locals a call): a stack overflow
//   5: a store to address 2^46 (nothing there)
// Every other thread writes d_out[i] = 2.
#include <cuda_runtime.h>

#define N 1024

__device__ __noinline__ int deeper(int n, volatile int* sink)
{
    volatile int pad[256];
    pad[n & 255] = n;
    if (n >= 0)
        return deeper(n + 1, sink) + pad[0];
    return sink[0];
}

__device__ void body(int m, float* out, int* div, int i)
{
    if (i == 37) {
        if (m == 1)
            out[i + 8192] = 1.0f;
        if (m == 2)
            out[i] = (float)(i / div[0]);
        if (m == 3)
            __trap();
        if (m == 4)
            out[i] = (float)deeper(0, div);
        if (m == 5)
            *(volatile float*)(1ull << 46) = 1.0f;
        return;
    }
    out[i] = 2.0f;
}

__global__ void faulty(const int* mode, float* out, int* div)
{
    body(mode[0], out, div, blockIdx.x * blockDim.x + threadIdx.x);
}

__global__ void faulty_fibers(const int* mode, float* out, int* div)
{
    __syncthreads();
    body(mode[0] - 10, out, div, blockIdx.x * blockDim.x + threadIdx.x);
}

int main()
{
    int *d_mode, *d_div;
    float* d_out;
    cudaMalloc(&d_mode, sizeof(int));
    cudaMalloc(&d_div, sizeof(int));
    cudaMalloc(&d_out, N * sizeof(float));
    faulty<<<N / 256, 256>>>(d_mode, d_out, d_div);
    faulty_fibers<<<N / 256, 256>>>(d_mode, d_out, d_div);
    cudaDeviceSynchronize();
    cudaFree(d_mode);
    cudaFree(d_div);
    cudaFree(d_out);
    return 0;
}
