// bitwise_cases.cu -- index arithmetic the access analysis reads through bit operations and
// switches (tests/analysis/test_bitwise_cases.py states the relation expected per kernel).
#include <cuda_runtime.h>

// an `or` whose operands share bits: t | 5 is t + 5 - (t & 5), not t + 5
__global__ void overlap(float* out)
{
    int t = threadIdx.x;
    out[t | 5] = 1.0f;
}

// a switch on the block index: each block stores to its own quarter
__global__ void switched(float* out, int k)
{
    int t = threadIdx.x;
    switch (blockIdx.x) {
    case 0: out[t] = 1.0f; break;
    case 1: out[64 + t] = (float)k; break;
    case 2: out[128 + t] = 3.0f * k; break;
    default: out[192 + t] = 4.0f; break;
    }
}

int main()
{
    float *d_a, *d_b;
    cudaMalloc(&d_a, 64 * sizeof(float));
    cudaMalloc(&d_b, 256 * sizeof(float));
    overlap<<<1, 48>>>(d_a);
    switched<<<4, 64>>>(d_b, 3);
    cudaFree(d_a);
    cudaFree(d_b);
    return 0;
}
