// refused.cu -- host loop nests that global fusion must NOT turn into wavefronts w = l + t
// (nests 1 and 4 take another skew; 2 and 3 stay as they are).
//
// Nest 1: cell (l, t) reads the vector that cell (l-1, t+1) wrote: a dependence of distance
// (1, -1), along the anti-diagonal l + t. Both ends of it lie on the same wavefront w = l + t, so
// that rewrite is illegal. The steeper skew w = 2l + t is legal (2 - 1 > 0), and so is w = l
// (the steps t of one l are independent): isl's band gives w = l, 3 stages of 4, fewer than
// 2l + t's, and that is used.
// Nest 4: the same with distance (1, -3): w = l + t and the fixed list's skews up to 3l + t
// leave both ends in one stage, but w = l is legal again and is used (3 stages of 4).
// Nest 2: a legal recurrence (cell (l, t) reads what (l, t-1) wrote), but the body also holds a
// cudaMemset: only nests whose body is made of launches are rewritten.
// Nest 3: ping-pong buffers swapped after every step t (a "rotating" address in the host model):
// the pass does not rewrite rotating addresses.
//
// Memory layout (fp32, N = 64 elements per vector, L = 3 levels, T = 4 slots):
//   d_a [L+1][T+1][N]  cell (l, t) reads level l slot t+1 and writes level l+1 slot t;
//                      level 0 is the input (slots 0..T).
//   d_b [L][T+1][N]    nest 2: cell (l, t) reads row l slot t, writes row l slot t+1.
//   d_p, d_q [L][N]    nest 3: step t of row l reads one and writes the other.
//   d_e [L+1][T+3][N]  nest 4: cell (l, t) reads level l slot t+3, writes level l+1 slot t.
//
// Expected host model:
//   buffers d_a (5120 bytes), d_b (3840 bytes), d_p (768), d_q (768);
//   loop l in [0, 3) { loop t in [0, 4) { launch step grid (2) block (32)
//        args (d_a + 1280l + 256t + 256, d_a + 1280l + 256t + 1280, 64) } }
//   loop l in [0, 3) { loop t in [0, 4) { memset d_b + 1280l + 256t + 256 = 0 (4 bytes);
//        launch step (d_b + 1280l + 256t, d_b + 1280l + 256t + 256, 64) } }
//   loop l in [0, 3) { loop t in [0, 4) { launch step ({d_p + 256l | d_q + 256l}[t mod 2],
//        {d_q + 256l | d_p + 256l}[t mod 2], 64) } }   (d_p, d_q: 768 bytes each)

#include <cuda_runtime.h>

#define N 64
#define L 3
#define T 4
#define BLOCK 32

__global__ void step(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = tanhf(in[i] * 0.75f + 0.125f);
}

int main()
{
    const size_t a_bytes = (size_t)(L + 1) * (T + 1) * N * sizeof(float);
    const size_t b_bytes = (size_t)L * (T + 1) * N * sizeof(float);
    const size_t e_bytes = (size_t)(L + 1) * (T + 3) * N * sizeof(float);
    float *d_a, *d_b, *d_p, *d_q, *d_e;
    cudaMalloc(&d_a, a_bytes);
    cudaMalloc(&d_e, e_bytes);
    cudaMalloc(&d_b, b_bytes);
    cudaMalloc(&d_p, L * N * sizeof(float));
    cudaMalloc(&d_q, L * N * sizeof(float));

    for (int l = 0; l < L; ++l) {
        for (int t = 0; t < T; ++t) {
            const float* in = d_a + (l * (T + 1) + t + 1) * N;
            float* out = d_a + ((l + 1) * (T + 1) + t) * N;
            step<<<N / BLOCK, BLOCK>>>(in, out, N);
        }
    }
    for (int l = 0; l < L; ++l) {
        for (int t = 0; t < T; ++t) {
            cudaMemset(d_b + (l * (T + 1) + t + 1) * N, 0, sizeof(float));
            step<<<N / BLOCK, BLOCK>>>(d_b + (l * (T + 1) + t) * N,
                                       d_b + (l * (T + 1) + t + 1) * N, N);
        }
    }
    for (int l = 0; l < L; ++l) {
        float* src = d_p + l * N;
        float* dst = d_q + l * N;
        for (int t = 0; t < T; ++t) {
            step<<<N / BLOCK, BLOCK>>>(src, dst, N);
            float* tmp = src;
            src = dst;
            dst = tmp;
        }
    }
    for (int l = 0; l < L; ++l) {
        for (int t = 0; t < T; ++t) {
            const float* in = d_e + (l * (T + 3) + t + 3) * N;
            float* out = d_e + ((l + 1) * (T + 3) + t) * N;
            step<<<N / BLOCK, BLOCK>>>(in, out, N);
        }
    }
    cudaDeviceSynchronize();
    cudaFree(d_e);
    cudaFree(d_a);
    cudaFree(d_b);
    cudaFree(d_p);
    cudaFree(d_q);
    return 0;
}
