// matmul_320.cu -- kernels/matmul_bias_act.cu with M = N = K = 320 (tests/tune: the tiled matmul, issue-bound).
// bias add and a tanh activation.
//
// Why it is in the corpus: the classic dense layer. The matmul is a 2-D launch with two 16x16
// shared tiles (2 * 16*16*4 = 2048 bytes of static shared memory) and two __syncthreads per tile
// step; the bias and activation kernels are 1-D launches with different block sizes. The bias
// and activation launches depend on the matmul's C element by element, but the matmul writes
// C[row*64 + col] from a 2-D (block, thread) index, so aligning it with the 1-D launches needs
// the row/col <-> linear-index map; act_tanh depends on bias_add thread-for-element.
//
// Expected host model:
//   buffers (allocation order): d_A 16384, d_B 16384, d_bias 256, d_C 16384, d_out 16384 bytes.
//   copies H2D: d_A <- h_A (16384), d_B <- h_B (16384), d_bias <- h_bias (256).
//   launches, no host loops:
//     matmul   grid (4,4,1)  block (16,16,1) args (d_A, d_B, d_C, 64, 64, 64)
//     bias_add grid (16,1,1) block (256,1,1) args (d_C, d_bias, 64, 64)      (in place on C)
//     act_tanh grid (32,1,1) block (128,1,1) args (d_C, d_out, 4096)
//   cudaDeviceSynchronize, copy D2H h_out <- d_out (16384), cudaFree of the five buffers in
//   allocation order.
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

#define TILE 16
const int M = 320;
const int N = 320;
const int K = 320;

// C[M x N] = A[M x K] * B[K x N], row-major.
__global__ void matmul(const float* A, const float* B, float* C, int m, int n, int k) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int t = 0; t < (k + TILE - 1) / TILE; ++t) {
        int a_col = t * TILE + tx;
        int b_row = t * TILE + ty;
        As[ty][tx] = (row < m && a_col < k) ? A[row * k + a_col] : 0.0f;
        Bs[ty][tx] = (b_row < k && col < n) ? B[b_row * n + col] : 0.0f;
        __syncthreads();
        for (int i = 0; i < TILE; ++i) acc += As[ty][i] * Bs[i][tx];
        __syncthreads();
    }
    if (row < m && col < n) C[row * n + col] = acc;
}

// C[r][c] += bias[c]
__global__ void bias_add(float* C, const float* bias, int m, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < m * n) C[i] += bias[i % n];
}

__global__ void act_tanh(const float* C, float* out, int total) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) out[i] = tanhf(C[i]);
}

int main() {
    const size_t bytes_A = M * K * sizeof(float);
    const size_t bytes_B = K * N * sizeof(float);
    const size_t bytes_C = M * N * sizeof(float);
    const size_t bytes_bias = N * sizeof(float);

    float* h_A = (float*)malloc(bytes_A);
    float* h_B = (float*)malloc(bytes_B);
    float* h_bias = (float*)malloc(bytes_bias);
    float* h_out = (float*)malloc(bytes_C);
    for (int i = 0; i < M * K; ++i) h_A[i] = (float)((i * 7) % 19 - 9) * 0.015625f;
    for (int i = 0; i < K * N; ++i) h_B[i] = (float)((i * 5) % 23 - 11) * 0.03125f;
    for (int j = 0; j < N; ++j) h_bias[j] = (float)(j % 9 - 4) * 0.125f;

    float *d_A, *d_B, *d_bias, *d_C, *d_out;
    CHECK(cudaMalloc(&d_A, bytes_A));
    CHECK(cudaMalloc(&d_B, bytes_B));
    CHECK(cudaMalloc(&d_bias, bytes_bias));
    CHECK(cudaMalloc(&d_C, bytes_C));
    CHECK(cudaMalloc(&d_out, bytes_C));

    CHECK(cudaMemcpy(d_A, h_A, bytes_A, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_B, h_B, bytes_B, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_bias, h_bias, bytes_bias, cudaMemcpyHostToDevice));

    dim3 mm_block(TILE, TILE);
    dim3 mm_grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    matmul<<<mm_grid, mm_block>>>(d_A, d_B, d_C, M, N, K);
    bias_add<<<(M * N + 255) / 256, 256>>>(d_C, d_bias, M, N);
    act_tanh<<<(M * N + 127) / 128, 128>>>(d_C, d_out, M * N);
    CHECK(cudaDeviceSynchronize());

    CHECK(cudaMemcpy(h_out, d_out, bytes_C, cudaMemcpyDeviceToHost));

    int bad = 0;
    for (int r = 0; r < M; ++r) {
        for (int c = 0; c < N; ++c) {
            float acc = 0.0f;
            for (int i = 0; i < K; ++i) acc += h_A[r * K + i] * h_B[i * N + c];
            float ref = tanhf(acc + h_bias[c]);
            if (fabsf(h_out[r * N + c] - ref) > 1e-4f) ++bad;
        }
    }
    printf("matmul_bias_act: %s (%d mismatches)\n", bad ? "FAIL" : "PASS", bad);

    CHECK(cudaFree(d_A));
    CHECK(cudaFree(d_B));
    CHECK(cudaFree(d_bias));
    CHECK(cudaFree(d_C));
    CHECK(cudaFree(d_out));
    free(h_A);
    free(h_B);
    free(h_bias);
    free(h_out);
    return 0;
}
