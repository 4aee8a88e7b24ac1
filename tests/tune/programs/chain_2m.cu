// chain_2m.cu -- kernels/elementwise_chain.cu with N = 2M floats (tests/tune: a memory-bound chain).
//
// Why it is in the corpus: the simplest fusible case. Every launch depends on the one before it
// only element by element (thread-level dependences), but the launches use DIFFERENT block sizes
// (128, 256, 64, 96), so fusion has to align them on the global linear thread id ("reshape the
// iteration domain") instead of on (block, thread) pairs. The last block size does not divide N,
// so the last kernel's grid has a partial last block and its bounds check matters.
//
// Expected host model:
//   buffers (allocation order): d_x, d_bias, d_y, d_z, d_out, each N*4 = 16384 bytes.
//   copies H2D: d_x <- h_x, d_bias <- h_bias (16384 bytes each).
//   launches, no host loops:
//     scale    grid (32,1,1)  block (128,1,1)  args (d_x, d_y, 0.5f, 4096)
//     add_bias grid (16,1,1)  block (256,1,1)  args (d_y, d_bias, d_z, 4096)
//     relu     grid (64,1,1)  block (64,1,1)   args (d_z, 4096)             (in place)
//     square   grid (43,1,1)  block (96,1,1)   args (d_z, d_out, 4096)      (43*96 = 4128 > N)
//   cudaDeviceSynchronize, copy D2H h_out <- d_out (16384 bytes), then cudaFree of all five
//   buffers in allocation order.
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

const int N = 1 << 21;  // 2M floats: 8 MiB per buffer, memory-bound on every GPU of the table

__global__ void scale(const float* x, float* y, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = s * x[i];
}

__global__ void add_bias(const float* y, const float* bias, float* z, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) z[i] = y[i] + bias[i];
}

__global__ void relu(float* z, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) z[i] = fmaxf(z[i], 0.0f);
}

__global__ void square(const float* z, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = z[i];
        out[i] = v * v;
    }
}

int main() {
    const size_t bytes = N * sizeof(float);
    float* h_x = (float*)malloc(bytes);
    float* h_bias = (float*)malloc(bytes);
    float* h_out = (float*)malloc(bytes);
    for (int i = 0; i < N; ++i) {
        h_x[i] = (float)((i * 37) % 101) * 0.125f - 6.0f;
        h_bias[i] = (float)(i % 13) * 0.25f - 1.5f;
    }

    float *d_x, *d_bias, *d_y, *d_z, *d_out;
    CHECK(cudaMalloc(&d_x, bytes));
    CHECK(cudaMalloc(&d_bias, bytes));
    CHECK(cudaMalloc(&d_y, bytes));
    CHECK(cudaMalloc(&d_z, bytes));
    CHECK(cudaMalloc(&d_out, bytes));

    CHECK(cudaMemcpy(d_x, h_x, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_bias, h_bias, bytes, cudaMemcpyHostToDevice));

    const int B1 = 128, B2 = 256, B3 = 64, B4 = 96;
    const float s = 0.5f;
    scale<<<(N + B1 - 1) / B1, B1>>>(d_x, d_y, s, N);
    add_bias<<<(N + B2 - 1) / B2, B2>>>(d_y, d_bias, d_z, N);
    relu<<<(N + B3 - 1) / B3, B3>>>(d_z, N);
    square<<<(N + B4 - 1) / B4, B4>>>(d_z, d_out, N);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());

    CHECK(cudaMemcpy(h_out, d_out, bytes, cudaMemcpyDeviceToHost));

    int bad = 0;
    for (int i = 0; i < N; ++i) {
        float v = s * h_x[i] + h_bias[i];
        v = v > 0.0f ? v : 0.0f;
        float ref = v * v;
        if (fabsf(h_out[i] - ref) > 1e-5f * fmaxf(1.0f, fabsf(ref))) ++bad;
    }
    printf("elementwise_chain: %s (%d mismatches)\n", bad ? "FAIL" : "PASS", bad);

    CHECK(cudaFree(d_x));
    CHECK(cudaFree(d_bias));
    CHECK(cudaFree(d_y));
    CHECK(cudaFree(d_z));
    CHECK(cudaFree(d_out));
    free(h_x);
    free(h_bias);
    free(h_out);
    return 0;
}
