// lstm_cell.cu -- a 2-layer LSTM unrolled over 4 timesteps: one kernel launch per cell.
//
// What it covers: a launch inside a two-deep host loop nest (layer l outer, timestep t inner)
// whose pointer arguments sit at byte offsets of a few big allocations that are affine in BOTH
// loop variables. This is the paper's LSTM case: the cell (l, t) depends on (l, t-1) through the
// hidden and cell state and on (l-1, t) through its input, so the independent cells lie on
// anti-diagonals (a wavefront) that global fusion can put into one stage.
//
// Why it is in the corpus: it is the main demo (`make demo` runs `sirius inspect` on it) and the
// reference case for launch statements with a 2-D iteration domain S[l, t].
//
// Memory layout (all fp32; H = 64 hidden units, L = 2 layers, T = 4 timesteps):
//   d_w  [L][4H][H]  input weights of layer l at d_w + l*4*H*H; rows g*H..g*H+H-1 are gate g
//                    (gates in the order i, f, g, o)
//   d_u  [L][4H][H]  recurrent weights, same layout, at d_u + l*4*H*H
//   d_b  [L][4H]     biases, at d_b + l*4*H
//   d_h  [L+1][T+1][H]  the sequences: "level" 0 is the network input, level k = l+1 the hidden
//                    states of layer l. Slot 0 of every level is the initial state (zero) and
//                    slot t+1 the value at time t. So the cell (l, t) reads its input x_t at
//                    d_h + (l*(T+1) + t + 1)*H (for l > 0 that is the output of layer l-1 at
//                    time t), its previous hidden state at d_h + ((l+1)*(T+1) + t)*H, and writes
//                    its hidden state to d_h + ((l+1)*(T+1) + t + 1)*H.
//   d_c  [L][T+1][H] cell states: the cell (l, t) reads d_c + (l*(T+1) + t)*H and writes
//                    d_c + (l*(T+1) + t + 1)*H.
//
// Expected host model:
//   buffers, in allocation order: d_w (131072 bytes), d_u (131072), d_b (2048), d_h (3840),
//                                 d_c (2560)
//   ops: 5 allocs; memset d_h 0 (3840 bytes); memset d_c 0 (2560 bytes);
//        copy H2D d_w, d_u, d_b (whole buffers); copy H2D d_h + 256 bytes <- input (1024 bytes);
//        loop l in [0, 2) step 1 { loop t in [0, 4) step 1 {
//            launch lstm_cell grid (2,1,1) block (32,1,1) smem 0 args, as byte offsets:
//              (d_h + 1280l + 256t + 256,  d_h + 1280l + 256t + 1280,  d_c + 1280l + 256t,
//               d_w + 65536l,  d_u + 65536l,  d_b + 1024l,
//               d_h + 1280l + 256t + 1536,  d_c + 1280l + 256t + 256,  64) } }
//        sync device; copy D2H <- d_h + 2816 bytes (layer 1's outputs, 1024 bytes);
//        5 frees
//   kernel lstm_cell: 512 bytes of static shared memory (x and h_prev staged), one barrier.

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define CUDA_CHECK(call)                                                                   \
    do {                                                                                   \
        cudaError_t err_ = (call);                                                         \
        if (err_ != cudaSuccess) {                                                         \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_));  \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

#define H 64       // hidden units (also the input width)
#define L 2        // layers
#define T 4        // timesteps
#define BLOCK 32   // threads per block: one thread per hidden unit

__device__ float sigmoidf(float v)
{
    return 1.0f / (1.0f + expf(-v));
}

// One LSTM cell: h_out, c_out = cell(x, h_prev, c_prev) for `hidden` units (hidden <= H).
// Thread j computes hidden unit j; x and h_prev are staged in shared memory first.
__global__ void lstm_cell(const float* x, const float* h_prev, const float* c_prev,
                          const float* w, const float* u, const float* b,
                          float* h_out, float* c_out, int hidden)
{
    __shared__ float s_x[H];
    __shared__ float s_h[H];
    for (int k = threadIdx.x; k < hidden; k += blockDim.x) {
        s_x[k] = x[k];
        s_h[k] = h_prev[k];
    }
    __syncthreads();

    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < hidden) {
        float gate[4];
        for (int g = 0; g < 4; ++g) {
            int row = g * hidden + j;
            float acc = b[row];
            for (int k = 0; k < hidden; ++k)
                acc += w[row * hidden + k] * s_x[k] + u[row * hidden + k] * s_h[k];
            gate[g] = acc;
        }
        float in_gate = sigmoidf(gate[0]);
        float forget_gate = sigmoidf(gate[1]);
        float cand = tanhf(gate[2]);
        float out_gate = sigmoidf(gate[3]);
        float c = forget_gate * c_prev[j] + in_gate * cand;
        c_out[j] = c;
        h_out[j] = out_gate * tanhf(c);
    }
}

static void lstm_cell_cpu(const float* x, const float* h_prev, const float* c_prev,
                          const float* w, const float* u, const float* b, float* h_out,
                          float* c_out)
{
    for (int j = 0; j < H; ++j) {
        float gate[4];
        for (int g = 0; g < 4; ++g) {
            int row = g * H + j;
            float acc = b[row];
            for (int k = 0; k < H; ++k)
                acc += w[row * H + k] * x[k] + u[row * H + k] * h_prev[k];
            gate[g] = acc;
        }
        float in_gate = 1.0f / (1.0f + expf(-gate[0]));
        float forget_gate = 1.0f / (1.0f + expf(-gate[1]));
        float cand = tanhf(gate[2]);
        float out_gate = 1.0f / (1.0f + expf(-gate[3]));
        float c = forget_gate * c_prev[j] + in_gate * cand;
        c_out[j] = c;
        h_out[j] = out_gate * tanhf(c);
    }
}

int main()
{
    const size_t w_bytes = (size_t)L * 4 * H * H * sizeof(float);
    const size_t b_bytes = (size_t)L * 4 * H * sizeof(float);
    const size_t h_bytes = (size_t)(L + 1) * (T + 1) * H * sizeof(float);
    const size_t c_bytes = (size_t)L * (T + 1) * H * sizeof(float);
    const size_t seq_bytes = (size_t)T * H * sizeof(float);

    float* h_w = (float*)malloc(w_bytes);
    float* h_u = (float*)malloc(w_bytes);
    float* h_b = (float*)malloc(b_bytes);
    float* h_x = (float*)malloc(seq_bytes);
    float* h_y = (float*)malloc(seq_bytes);
    for (int i = 0; i < L * 4 * H * H; ++i) {
        h_w[i] = (float)((i * 37) % 101 - 50) / 1000.0f;
        h_u[i] = (float)((i * 53) % 97 - 48) / 1000.0f;
    }
    for (int i = 0; i < L * 4 * H; ++i)
        h_b[i] = (float)(i % 13 - 6) / 20.0f;
    for (int i = 0; i < T * H; ++i)
        h_x[i] = (float)((i * 29) % 41 - 20) / 20.0f;

    float *d_w, *d_u, *d_b, *d_h, *d_c;
    CUDA_CHECK(cudaMalloc(&d_w, w_bytes));
    CUDA_CHECK(cudaMalloc(&d_u, w_bytes));
    CUDA_CHECK(cudaMalloc(&d_b, b_bytes));
    CUDA_CHECK(cudaMalloc(&d_h, h_bytes));
    CUDA_CHECK(cudaMalloc(&d_c, c_bytes));

    // Initial hidden and cell states are zero; the input sequence goes to level 0, slots 1..T.
    CUDA_CHECK(cudaMemset(d_h, 0, h_bytes));
    CUDA_CHECK(cudaMemset(d_c, 0, c_bytes));
    CUDA_CHECK(cudaMemcpy(d_w, h_w, w_bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_u, h_u, w_bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_b, h_b, b_bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_h + H, h_x, seq_bytes, cudaMemcpyHostToDevice));

    for (int l = 0; l < L; ++l) {
        for (int t = 0; t < T; ++t) {
            const float* x = d_h + (l * (T + 1) + t + 1) * H;            // input at time t
            const float* h_prev = d_h + ((l + 1) * (T + 1) + t) * H;     // h at time t-1
            const float* c_prev = d_c + (l * (T + 1) + t) * H;           // c at time t-1
            float* h_next = d_h + ((l + 1) * (T + 1) + t + 1) * H;       // h at time t
            float* c_next = d_c + (l * (T + 1) + t + 1) * H;             // c at time t
            lstm_cell<<<H / BLOCK, BLOCK>>>(x, h_prev, c_prev, d_w + l * 4 * H * H,
                                            d_u + l * 4 * H * H, d_b + l * 4 * H,
                                            h_next, c_next, H);
        }
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    // The last layer's hidden states at times 0..T-1: level L, slots 1..T.
    CUDA_CHECK(cudaMemcpy(h_y, d_h + (L * (T + 1) + 1) * H, seq_bytes, cudaMemcpyDeviceToHost));

    // CPU reference with the same layout.
    float* r_h = (float*)calloc((L + 1) * (T + 1) * H, sizeof(float));
    float* r_c = (float*)calloc(L * (T + 1) * H, sizeof(float));
    for (int i = 0; i < T * H; ++i)
        r_h[H + i] = h_x[i];
    for (int l = 0; l < L; ++l)
        for (int t = 0; t < T; ++t)
            lstm_cell_cpu(r_h + (l * (T + 1) + t + 1) * H, r_h + ((l + 1) * (T + 1) + t) * H,
                          r_c + (l * (T + 1) + t) * H, h_w + l * 4 * H * H, h_u + l * 4 * H * H,
                          h_b + l * 4 * H, r_h + ((l + 1) * (T + 1) + t + 1) * H,
                          r_c + (l * (T + 1) + t + 1) * H);
    int bad = 0;
    for (int i = 0; i < T * H; ++i)
        if (fabsf(h_y[i] - r_h[(L * (T + 1) + 1) * H + i]) > 1e-4f)
            ++bad;
    printf("lstm_cell: %s (%d mismatches)\n", bad ? "FAIL" : "PASS", bad);

    CUDA_CHECK(cudaFree(d_w));
    CUDA_CHECK(cudaFree(d_u));
    CUDA_CHECK(cudaFree(d_b));
    CUDA_CHECK(cudaFree(d_h));
    CUDA_CHECK(cudaFree(d_c));
    free(h_w);
    free(h_u);
    free(h_b);
    free(h_x);
    free(h_y);
    free(r_h);
    free(r_c);
    return 0;
}
