// two_mm.cu -- PolyBench/GPU 2mm: tmp = alpha * A * B;  D = beta * D + tmp * C.
// Sizes NI = 32, NJ = 40, NK = 48, NL = 36 (distinct, so a swapped size argument shows).
//
// Why it is in the corpus: the kernels take their sizes and the float scalars alpha and beta as
// arguments, in PolyBench's argument order (four ints, two floats, then pointers), so the host
// model must resolve scalar int and float arguments as well as buffers. The second launch reads
// a whole row of tmp per thread (tmp[i][k] for all k), written by many threads of the first
// launch in other blocks: a GLOBAL dependence, so the two launches cannot be fused locally.
// A 32x8 block shape with grids rounded up leaves idle threads (bounds checks in both kernels).
//
// Expected host model:
//   buffers (allocation order): d_A 6144 (NI*NK*4), d_B 7680 (NK*NJ*4), d_tmp 5120 (NI*NJ*4),
//     d_C 5760 (NJ*NL*4), d_D 4608 (NI*NL*4) bytes.
//   copies H2D: d_A <- h_A, d_B <- h_B, d_C <- h_C, d_D <- h_D (sizes as the buffers).
//   launches, no host loops, block (32,8,1):
//     mm2_kernel1 grid (2,4,1) args (32, 40, 48, 36, 1.5f, 1.2f, d_tmp, d_A, d_B)
//     cudaDeviceSynchronize
//     mm2_kernel2 grid (2,4,1) args (32, 40, 48, 36, 1.5f, 1.2f, d_tmp, d_C, d_D)
//     cudaDeviceSynchronize
//   copy D2H h_D <- d_D (4608 bytes), cudaFree of the five buffers in allocation order.
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

#define NI 32
#define NJ 40
#define NK 48
#define NL 36
#define DIM_THREAD_BLOCK_X 32
#define DIM_THREAD_BLOCK_Y 8

// tmp[i][j] = sum_k alpha * A[i][k] * B[k][j]
__global__ void mm2_kernel1(int ni, int nj, int nk, int nl, float alpha, float beta, float* tmp,
                            const float* A, const float* B) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < ni && j < nj) {
        float acc = 0.0f;
        for (int k = 0; k < nk; ++k) acc += alpha * A[i * nk + k] * B[k * nj + j];
        tmp[i * nj + j] = acc;
    }
}

// D[i][l] = beta * D[i][l] + sum_j tmp[i][j] * C[j][l]
__global__ void mm2_kernel2(int ni, int nj, int nk, int nl, float alpha, float beta,
                            const float* tmp, const float* C, float* D) {
    int l = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < ni && l < nl) {
        float acc = D[i * nl + l] * beta;
        for (int j = 0; j < nj; ++j) acc += tmp[i * nj + j] * C[j * nl + l];
        D[i * nl + l] = acc;
    }
}

int main() {
    const int ni = NI, nj = NJ, nk = NK, nl = NL;
    const float alpha = 1.5f;
    const float beta = 1.2f;

    const size_t a_bytes = NI * NK * sizeof(float);
    const size_t b_bytes = NK * NJ * sizeof(float);
    const size_t tmp_bytes = NI * NJ * sizeof(float);
    const size_t c_bytes = NJ * NL * sizeof(float);
    const size_t d_bytes = NI * NL * sizeof(float);

    float* h_A = (float*)malloc(a_bytes);
    float* h_B = (float*)malloc(b_bytes);
    float* h_C = (float*)malloc(c_bytes);
    float* h_D = (float*)malloc(d_bytes);
    float* h_ref = (float*)malloc(d_bytes);
    float* h_tmp = (float*)malloc(tmp_bytes);
    // PolyBench's init_array, scaled down.
    for (int i = 0; i < NI; ++i)
        for (int k = 0; k < NK; ++k) h_A[i * NK + k] = (float)(i * k % NI) / NI;
    for (int k = 0; k < NK; ++k)
        for (int j = 0; j < NJ; ++j) h_B[k * NJ + j] = (float)(k * (j + 1) % NJ) / NJ;
    for (int j = 0; j < NJ; ++j)
        for (int l = 0; l < NL; ++l) h_C[j * NL + l] = (float)(j * (l + 3) % NL) / NL;
    for (int i = 0; i < NI; ++i)
        for (int l = 0; l < NL; ++l) h_D[i * NL + l] = (float)(i * (l + 2) % NK) / NK;

    // CPU reference (before h_D is overwritten by the result).
    for (int i = 0; i < NI; ++i)
        for (int j = 0; j < NJ; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < NK; ++k) acc += alpha * h_A[i * NK + k] * h_B[k * NJ + j];
            h_tmp[i * NJ + j] = acc;
        }
    for (int i = 0; i < NI; ++i)
        for (int l = 0; l < NL; ++l) {
            float acc = h_D[i * NL + l] * beta;
            for (int j = 0; j < NJ; ++j) acc += h_tmp[i * NJ + j] * h_C[j * NL + l];
            h_ref[i * NL + l] = acc;
        }

    float *d_A, *d_B, *d_tmp, *d_C, *d_D;
    CHECK(cudaMalloc(&d_A, a_bytes));
    CHECK(cudaMalloc(&d_B, b_bytes));
    CHECK(cudaMalloc(&d_tmp, tmp_bytes));
    CHECK(cudaMalloc(&d_C, c_bytes));
    CHECK(cudaMalloc(&d_D, d_bytes));

    CHECK(cudaMemcpy(d_A, h_A, a_bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_B, h_B, b_bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_C, h_C, c_bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_D, h_D, d_bytes, cudaMemcpyHostToDevice));

    dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
    dim3 grid1((NJ + DIM_THREAD_BLOCK_X - 1) / DIM_THREAD_BLOCK_X,
               (NI + DIM_THREAD_BLOCK_Y - 1) / DIM_THREAD_BLOCK_Y);
    dim3 grid2((NL + DIM_THREAD_BLOCK_X - 1) / DIM_THREAD_BLOCK_X,
               (NI + DIM_THREAD_BLOCK_Y - 1) / DIM_THREAD_BLOCK_Y);
    mm2_kernel1<<<grid1, block>>>(ni, nj, nk, nl, alpha, beta, d_tmp, d_A, d_B);
    CHECK(cudaDeviceSynchronize());
    mm2_kernel2<<<grid2, block>>>(ni, nj, nk, nl, alpha, beta, d_tmp, d_C, d_D);
    CHECK(cudaDeviceSynchronize());

    CHECK(cudaMemcpy(h_D, d_D, d_bytes, cudaMemcpyDeviceToHost));

    int bad = 0;
    for (int i = 0; i < NI * NL; ++i)
        if (fabsf(h_D[i] - h_ref[i]) > 1e-3f * fmaxf(1.0f, fabsf(h_ref[i]))) ++bad;
    printf("two_mm: %s (%d mismatches)\n", bad ? "FAIL" : "PASS", bad);

    CHECK(cudaFree(d_A));
    CHECK(cudaFree(d_B));
    CHECK(cudaFree(d_tmp));
    CHECK(cudaFree(d_C));
    CHECK(cudaFree(d_D));
    free(h_A);
    free(h_B);
    free(h_C);
    free(h_D);
    free(h_ref);
    free(h_tmp);
    return 0;
}
