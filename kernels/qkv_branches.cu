// qkv_branches.cu -- the BERT self-attention QKV projection: Q = X*Wq + bq, K = X*Wk + bk,
// V = X*Wv + bv with X of shape (seq 32 x hidden 64) and 64x64 weights.
//
// Why it is in the corpus: three INDEPENDENT launches of the SAME kernel (dense_bias) with the
// same launch shape, sharing only the read-only input X. No dependence links them, and their
// code is identical, so principle P3 allows fusing them horizontally (the paper's BERT QKV
// case). Each branch has its own weight, bias and output buffer.
//
// Expected host model:
//   buffers (allocation order): d_X 8192, d_Wq 16384, d_Wk 16384, d_Wv 16384, d_bq 256,
//     d_bk 256, d_bv 256, d_Q 8192, d_K 8192, d_V 8192 bytes.
//   copies H2D: d_X, d_Wq, d_Wk, d_Wv, d_bq, d_bk, d_bv from h_X, h_Wq, h_Wk, h_Wv, h_bq, h_bk,
//     h_bv (sizes as the buffers).
//   launches, no host loops, all dense_bias grid (4,2,1) block (16,16,1):
//     args (d_X, d_Wq, d_bq, d_Q, 32, 64, 64)
//     args (d_X, d_Wk, d_bk, d_K, 32, 64, 64)
//     args (d_X, d_Wv, d_bv, d_V, 32, 64, 64)
//   cudaDeviceSynchronize, copies D2H h_Q <- d_Q, h_K <- d_K, h_V <- d_V (8192 bytes each),
//   cudaFree of the ten buffers in allocation order.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cuda_runtime.h>

#define CHECK(call)                                                                   \
    do {                                                                              \
        cudaError_t err_ = (call);                                                    \
        if (err_ != cudaSuccess) {                                                    \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

const int SEQ = 32;
const int HIDDEN = 64;
#define BX 16
#define BY 16

// Y[s][o] = sum_k X[s][k] * W[k][o] + b[o];  X: seq x in_dim, W: in_dim x out_dim.
__global__ void dense_bias(const float* X, const float* W, const float* b, float* Y, int seq,
                           int in_dim, int out_dim) {
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    int s = blockIdx.y * blockDim.y + threadIdx.y;
    if (s < seq && o < out_dim) {
        float acc = b[o];
        for (int k = 0; k < in_dim; ++k) acc += X[s * in_dim + k] * W[k * out_dim + o];
        Y[s * out_dim + o] = acc;
    }
}

static void fill(float* p, int n, int seed) {
    for (int i = 0; i < n; ++i) p[i] = (float)((i * 13 + seed * 7) % 29 - 14) * 0.0625f;
}

static int check(const float* h_X, const float* h_W, const float* h_b, const float* h_Y) {
    int bad = 0;
    for (int s = 0; s < SEQ; ++s) {
        for (int o = 0; o < HIDDEN; ++o) {
            float acc = h_b[o];
            for (int k = 0; k < HIDDEN; ++k) acc += h_X[s * HIDDEN + k] * h_W[k * HIDDEN + o];
            if (fabsf(h_Y[s * HIDDEN + o] - acc) > 1e-3f * fmaxf(1.0f, fabsf(acc))) ++bad;
        }
    }
    return bad;
}

int main() {
    const size_t x_bytes = SEQ * HIDDEN * sizeof(float);
    const size_t w_bytes = HIDDEN * HIDDEN * sizeof(float);
    const size_t b_bytes = HIDDEN * sizeof(float);

    float* h_X = (float*)malloc(x_bytes);
    float* h_Wq = (float*)malloc(w_bytes);
    float* h_Wk = (float*)malloc(w_bytes);
    float* h_Wv = (float*)malloc(w_bytes);
    float* h_bq = (float*)malloc(b_bytes);
    float* h_bk = (float*)malloc(b_bytes);
    float* h_bv = (float*)malloc(b_bytes);
    float* h_Q = (float*)malloc(x_bytes);
    float* h_K = (float*)malloc(x_bytes);
    float* h_V = (float*)malloc(x_bytes);
    fill(h_X, SEQ * HIDDEN, 1);
    fill(h_Wq, HIDDEN * HIDDEN, 2);
    fill(h_Wk, HIDDEN * HIDDEN, 3);
    fill(h_Wv, HIDDEN * HIDDEN, 4);
    fill(h_bq, HIDDEN, 5);
    fill(h_bk, HIDDEN, 6);
    fill(h_bv, HIDDEN, 7);

    float *d_X, *d_Wq, *d_Wk, *d_Wv, *d_bq, *d_bk, *d_bv, *d_Q, *d_K, *d_V;
    CHECK(cudaMalloc(&d_X, x_bytes));
    CHECK(cudaMalloc(&d_Wq, w_bytes));
    CHECK(cudaMalloc(&d_Wk, w_bytes));
    CHECK(cudaMalloc(&d_Wv, w_bytes));
    CHECK(cudaMalloc(&d_bq, b_bytes));
    CHECK(cudaMalloc(&d_bk, b_bytes));
    CHECK(cudaMalloc(&d_bv, b_bytes));
    CHECK(cudaMalloc(&d_Q, x_bytes));
    CHECK(cudaMalloc(&d_K, x_bytes));
    CHECK(cudaMalloc(&d_V, x_bytes));

    CHECK(cudaMemcpy(d_X, h_X, x_bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_Wq, h_Wq, w_bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_Wk, h_Wk, w_bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_Wv, h_Wv, w_bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_bq, h_bq, b_bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_bk, h_bk, b_bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_bv, h_bv, b_bytes, cudaMemcpyHostToDevice));

    dim3 block(BX, BY);
    dim3 grid((HIDDEN + BX - 1) / BX, (SEQ + BY - 1) / BY);
    dense_bias<<<grid, block>>>(d_X, d_Wq, d_bq, d_Q, SEQ, HIDDEN, HIDDEN);
    dense_bias<<<grid, block>>>(d_X, d_Wk, d_bk, d_K, SEQ, HIDDEN, HIDDEN);
    dense_bias<<<grid, block>>>(d_X, d_Wv, d_bv, d_V, SEQ, HIDDEN, HIDDEN);
    CHECK(cudaDeviceSynchronize());

    CHECK(cudaMemcpy(h_Q, d_Q, x_bytes, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(h_K, d_K, x_bytes, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(h_V, d_V, x_bytes, cudaMemcpyDeviceToHost));

    int bad = check(h_X, h_Wq, h_bq, h_Q) + check(h_X, h_Wk, h_bk, h_K) +
              check(h_X, h_Wv, h_bv, h_V);
    printf("qkv_branches: %s (%d mismatches)\n", bad ? "FAIL" : "PASS", bad);

    CHECK(cudaFree(d_X));
    CHECK(cudaFree(d_Wq));
    CHECK(cudaFree(d_Wk));
    CHECK(cudaFree(d_Wv));
    CHECK(cudaFree(d_bq));
    CHECK(cudaFree(d_bk));
    CHECK(cudaFree(d_bv));
    CHECK(cudaFree(d_Q));
    CHECK(cudaFree(d_K));
    CHECK(cudaFree(d_V));
    free(h_X);
    free(h_Wq);
    free(h_Wk);
    free(h_Wv);
    free(h_bq);
    free(h_bk);
    free(h_bv);
    free(h_Q);
    free(h_K);
    free(h_V);
    return 0;
}
