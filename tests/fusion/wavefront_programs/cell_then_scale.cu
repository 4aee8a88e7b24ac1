// cell_then_scale.cu -- a recurrent nest whose body launches two kernels per (l, t).
//
// For each of B = 2 independent sequences b (the outer loop, which also clears the sequence's
// state first, so it is not part of a perfect nest), a 3-layer x 5-step recurrence runs: at
// (l, t) `cell` combines the input x (layer l-1's output at time t) with the previous state
// (layer l's output at time t-1) into a temporary, and `scale` turns that temporary into the
// state of (l, t). So cell (l, t) depends on scale (l, t-1) and scale (l-1, t), and scale (l, t)
// on cell (l, t) (the same iteration: their order must be kept). Layer sizes differ from the
// step count (3 != 5), so the wavefronts w = l + t have 1, 2, 3, 3, 3, 2, 1 members.
//
// Memory layout (fp32, N = 64 elements per vector, L = 3, T = 5, B = 2):
//   d_h  [B][L+1][T+1][N]  level 0 is the input (slots 1..T); level l+1 holds layer l's
//                          states, slot 0 the initial state, slot t+1 the state at time t.
//   d_tmp [L][T][N]        the temporary of (l, t) (shared by both sequences).
//
// Expected host model:
//   buffers d_h (12288 bytes), d_tmp (3840 bytes);
//   loop b in [0, 2) { memset d_h + 6144b + 1536 = 0 (4608 bytes);
//     loop l in [0, 3) { loop t in [0, 5) {
//       launch cell grid (2) block (32) args (d_h + 6144b + 1536l + 256t + 256,
//              d_h + 6144b + 1536l + 256t + 1536, d_tmp + 1280l + 256t, 64);
//       launch scale grid (2) block (32) args (d_tmp + 1280l + 256t,
//              d_h + 6144b + 1536l + 256t + 1792, 0.5, 64) } } }

#include <cuda_runtime.h>

#define N 64
#define L 3
#define T 5
#define B 2
#define BLOCK 32

__global__ void cell(const float* x, const float* h_prev, float* tmp, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        tmp[i] = tanhf(0.5f * x[i] + 0.25f * h_prev[i]);
}

__global__ void scale(const float* tmp, float* h_out, float s, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        h_out[i] = s * tmp[i] + 0.125f;
}

int main()
{
    const size_t seq = (size_t)(L + 1) * (T + 1) * N;
    float *d_h, *d_tmp;
    cudaMalloc(&d_h, B * seq * sizeof(float));
    cudaMalloc(&d_tmp, (size_t)L * T * N * sizeof(float));

    for (int b = 0; b < B; ++b) {
        float* h = d_h + b * seq;
        cudaMemset(h + (T + 1) * N, 0, (size_t)L * (T + 1) * N * sizeof(float));
        for (int l = 0; l < L; ++l) {
            for (int t = 0; t < T; ++t) {
                float* tmp = d_tmp + (l * T + t) * N;
                cell<<<N / BLOCK, BLOCK>>>(h + (l * (T + 1) + t + 1) * N,
                                           h + ((l + 1) * (T + 1) + t) * N, tmp, N);
                scale<<<N / BLOCK, BLOCK>>>(tmp, h + ((l + 1) * (T + 1) + t + 1) * N, 0.5f, N);
            }
        }
    }
    cudaDeviceSynchronize();
    cudaFree(d_h);
    cudaFree(d_tmp);
    return 0;
}
