// isl_skews.cu -- host loop nests whose wavefront comes from isl's schedule, or from nowhere.
//
// Nest 1: cell (l, t) of L = 3 layers and T = 7 steps reads its own state at t-1 (written by cell
// (l, t-1)) and the output of the layer below four steps later (written by cell (l-1, t+4)): the
// dependence distances are (0, 1) and (1, -4). A wavefront w = a*l + b*t orders both when b > 0
// and a > 4b, so the flattest is w = 5l + t; none of the fixed skews of the pass (up to 3l + t,
// 3l + 2t) is legal, while isl's schedule of the nest has a permutable band whose members sum to
// it. Stages w = 0..16: l = 0 fills w = 0..6, l = 1 w = 5..11, l = 2 w = 10..16, so the stages
// 5, 6, 10 and 11 hold two cells and the other 13 one (21 cells).
// Nest 2: cell (l, t) reads its state at t-1 and the LAST output (t = T-1) of the layer below:
// distances (0, 1) and (1, -t) for every t <= T-1. A legal skew needs b > 0 and a > (T-1)*b,
// so every stage holds one cell: the instances form one chain and the nest is left alone.
//
// Memory layout (fp32, N = 64 elements per vector):
//   d_x [L+1][T+4][N]  cell (l, t) reads level l slot t+4 and writes level l+1 slot t; level 0
//                      is the input.
//   d_h [L][T+1][N]    cell (l, t) reads row l slot t and writes row l slot t+1; slot 0 is the
//                      initial state.
//   d_y [L+1][T][N]    nest 2: cell (l, t) reads level l slot T-1, writes level l+1 slot t.
//   d_g [L][T+1][N]    nest 2: like d_h.
//
// Expected host model:
//   buffers d_x (11264 bytes), d_h (6144 bytes), d_y (7168 bytes), d_g (6144 bytes);
//   loop l in [0, 3) { loop t in [0, 7) { launch cell grid (2) block (32)
//        args (d_x + 2816l + 256t + 1024, d_h + 2048l + 256t, d_x + 2816l + 256t + 2816,
//              d_h + 2048l + 256t + 256, 64) } }
//   loop l in [0, 3) { loop t in [0, 7) { launch cell grid (2) block (32)
//        args (d_y + 1792l + 1536, d_g + 2048l + 256t, d_y + 1792l + 256t + 1792,
//              d_g + 2048l + 256t + 256, 64) } }

#include <cuda_runtime.h>

#define N 64
#define L 3
#define T 7
#define BLOCK 32

__global__ void cell(const float* x, const float* h, float* x_out, float* h_out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = tanhf(0.5f * x[i] + 0.75f * h[i] + 0.125f);
        h_out[i] = v;
        x_out[i] = 0.25f * v - 0.5f * x[i];
    }
}

int main()
{
    float *d_x, *d_h, *d_y, *d_g;
    cudaMalloc(&d_x, (size_t)(L + 1) * (T + 4) * N * sizeof(float));
    cudaMalloc(&d_h, (size_t)L * (T + 1) * N * sizeof(float));
    cudaMalloc(&d_y, (size_t)(L + 1) * T * N * sizeof(float));
    cudaMalloc(&d_g, (size_t)L * (T + 1) * N * sizeof(float));
    for (int l = 0; l < L; ++l) {
        for (int t = 0; t < T; ++t) {
            const float* x = d_x + (l * (T + 4) + t + 4) * N;
            const float* h = d_h + (l * (T + 1) + t) * N;
            float* x_out = d_x + ((l + 1) * (T + 4) + t) * N;
            float* h_out = d_h + (l * (T + 1) + t + 1) * N;
            cell<<<N / BLOCK, BLOCK>>>(x, h, x_out, h_out, N);
        }
    }
    for (int l = 0; l < L; ++l) {
        for (int t = 0; t < T; ++t) {
            const float* x = d_y + (l * T + T - 1) * N;
            const float* h = d_g + (l * (T + 1) + t) * N;
            float* x_out = d_y + ((l + 1) * T + t) * N;
            float* h_out = d_g + (l * (T + 1) + t + 1) * N;
            cell<<<N / BLOCK, BLOCK>>>(x, h, x_out, h_out, N);
        }
    }
    cudaDeviceSynchronize();
    cudaFree(d_x);
    cudaFree(d_h);
    cudaFree(d_y);
    cudaFree(d_g);
    return 0;
}
