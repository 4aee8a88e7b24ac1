// deep_nest.cu -- a perfect 3-deep host loop nest with a strided and a descending loop.
//
// G = 3 independent groups g = 1, 3, 5 (stride 2), each a stack of L = 2 layers run from the
// top layer down (l = 1, 0), each layer a recurrence over T = 3 steps (t inner, kept as a loop).
// Cell (g, l, t) reads layer l+1's output at time t (written by cell (g, l+1, t)) and its own
// output at t-1. The wavefront skews the outer two loops, i = (g - 1)/2 and j = 1 - l: the
// groups are independent, so isl's band gives w = j (w = 1 - l), 2 stages of 3 members, fewer
// than the 4 stages (1, 2, 2, 1) of w = i + j; each member a (g, l) whose t loop runs inside it.
//
// Memory layout (fp32, N = 32 elements per vector):
//   d_h [G][L+1][T+1][N]  group g at d_h + (g/2)*S, S = (L+1)*(T+1)*N floats; level L holds the
//                         input (slots 1..T), level l < L the outputs of layer l (slot 0 the
//                         initial state, slot t+1 the state at time t).
//
// Expected host model:
//   buffers d_h (4608 bytes);
//   loop g in [1, 7) step 2 { loop l in [1, -1) step -1 { loop t in [0, 3) {
//     launch mix grid (1) block (32) args (d_h + 1536*floor(g/2) + 512l + 128t + 640,
//            d_h + 1536*floor(g/2) + 512l + 128t, d_h + 1536*floor(g/2) + 512l + 128t + 128,
//            32) } } }

#include <cuda_runtime.h>

#define N 32
#define G 3
#define L 2
#define T 3

__global__ void mix(const float* x, const float* h_prev, float* h_out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        h_out[i] = tanhf(0.5f * x[i] - 0.75f * h_prev[i] + 0.0625f);
}

int main()
{
    const int S = (L + 1) * (T + 1) * N;
    float* d_h;
    cudaMalloc(&d_h, (size_t)G * S * sizeof(float));
    for (int g = 1; g < 2 * G + 1; g += 2) {
        for (int l = L - 1; l >= 0; --l) {
            for (int t = 0; t < T; ++t) {
                float* h = d_h + (g / 2) * S;
                mix<<<1, N>>>(h + ((l + 1) * (T + 1) + t + 1) * N, h + (l * (T + 1) + t) * N,
                              h + (l * (T + 1) + t + 1) * N, N);
            }
        }
    }
    cudaDeviceSynchronize();
    cudaFree(d_h);
    return 0;
}
