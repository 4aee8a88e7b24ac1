// warp_chain.cu -- shuffles with only arithmetic between them (the executor's lane chains,
// sirius/runtime/cpu/lanechain.py): down, xor, up, idx with a constant lane, widths 32, 16 and
// 8, activemask in the middle, int and float, a value live across the whole chain, a shuffle
// whose result is dropped. tests/runtime/test_exec_loops.py has the numpy reference.
// Launches: `chain` over 4 blocks of 64 threads (full warps), then over 2 blocks of 48 threads
// (a warp of 16 lanes: lane by lane) on the same inputs.
#include <cuda_runtime.h>

#define N 256

__global__ void chain(const float* in, const int* iv, float* outf, int* outi, unsigned* outm)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = in[i];
    int a = iv[i];
    unsigned m = __activemask();
    float s = v;
    s += __shfl_down_sync(m, s, 16);
    s = s * 0.75f - __shfl_xor_sync(m, s, 8);
    s += __shfl_up_sync(m, s, 3);
    s = s < 4.0f ? s * 2.0f : s - 1.0f;
    s -= __shfl_sync(m, s, 5);
    (void)__shfl_down_sync(m, a, 1);
    int b = a ^ __shfl_xor_sync(m, a, 1, 16);
    b += __shfl_down_sync(m, b, 2, 8);
    unsigned m2 = __activemask();
    b = (b << 1) | (int)(m2 >> 31);
    int c = __shfl_up_sync(m, b * 3, 4, 8);
    c = max(c, __shfl_sync(m, c, 6, 16));
    outf[i] = s + (float)c + v;
    outi[i] = b + c + a;
    outm[i] = m2;
}

int main()
{
    float h_in[N];
    int h_iv[N];
    for (int i = 0; i < N; ++i) {
        h_in[i] = 0.25f * (float)((i * 37) % 29) - 3.0f;
        h_iv[i] = (i * 1103) % 211 - 100;
    }
    float *d_in, *d_outf, *d_outf2;
    int *d_iv, *d_outi, *d_outi2;
    unsigned *d_outm, *d_outm2;
    cudaMalloc(&d_in, N * sizeof(float));
    cudaMalloc(&d_iv, N * sizeof(int));
    cudaMalloc(&d_outf, N * sizeof(float));
    cudaMalloc(&d_outi, N * sizeof(int));
    cudaMalloc(&d_outm, N * sizeof(unsigned));
    cudaMalloc(&d_outf2, N * sizeof(float));
    cudaMalloc(&d_outi2, N * sizeof(int));
    cudaMalloc(&d_outm2, N * sizeof(unsigned));
    cudaMemcpy(d_in, h_in, N * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(d_iv, h_iv, N * sizeof(int), cudaMemcpyHostToDevice);
    chain<<<N / 64, 64>>>(d_in, d_iv, d_outf, d_outi, d_outm);
    chain<<<2, 48>>>(d_in, d_iv, d_outf2, d_outi2, d_outm2);
    cudaDeviceSynchronize();
    cudaFree(d_in);
    cudaFree(d_iv);
    cudaFree(d_outf);
    cudaFree(d_outi);
    cudaFree(d_outm);
    cudaFree(d_outf2);
    cudaFree(d_outi2);
    cudaFree(d_outm2);
    return 0;
}
