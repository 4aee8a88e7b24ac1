// asm_ldst.cu -- inline PTX loads and stores, which the executor lifts to ordinary accesses.
//
// n = 1000 floats, 4 blocks of 256. shift: out[i] = 2 * in[i + 1] with `ld.global.f32 [in+4]`
// and `st.global.f32`; bytes: tag[i] = i & 255 with `st.global.u8`. PLANTED BUG in past_end:
// thread n stores through `st.global.f32 [out + 4 * n]`, one element past the end of out.
#include <cuda_runtime.h>

#define N 1000
#define BLOCK 256

__global__ void shift(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v;
        asm volatile("ld.global.f32 %0, [%1+4];" : "=f"(v) : "l"(in + i) : "memory");
        asm volatile("{.reg .f32 t; add.f32 t, %1, %1; st.global.f32 [%0], t;}"
                     :: "l"(out + i), "f"(v) : "memory");
    }
}

__global__ void bytes(unsigned char* tag, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        asm volatile("st.global.u8 [%0], %1;" :: "l"(tag + i), "h"((unsigned short)(i + 256)) : "memory");
}

__global__ void past_end(float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == n)
        asm volatile("st.global.f32 [%0], %1;" :: "l"(out + i), "f"(1.0f) : "memory");
}

int main()
{
    float *d_in, *d_out;
    unsigned char* d_tag;
    cudaMalloc(&d_in, (N + 1) * sizeof(float));
    cudaMalloc(&d_out, N * sizeof(float));
    cudaMalloc(&d_tag, N);
    shift<<<(N + BLOCK - 1) / BLOCK, BLOCK>>>(d_in, d_out, N);
    bytes<<<(N + BLOCK - 1) / BLOCK, BLOCK>>>(d_tag, N);
    past_end<<<(N + BLOCK - 1) / BLOCK, BLOCK>>>(d_out, N);
    cudaDeviceSynchronize();
    return 0;
}
