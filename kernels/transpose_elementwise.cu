// transpose_elementwise.cu -- shared-memory tiled transpose of a 128x64 matrix, then an
// elementwise affine map (out = a*t + b) on the transposed 64x128 matrix.
//
// Why it is in the corpus: the transpose reads and writes global memory through a shared tile
// (32x33 floats = 4224 bytes, the extra column avoids bank conflicts) with one __syncthreads; a
// 32x8 thread block covers a 32x32 tile by looping 4 rows per thread. The thread that writes an
// element of T is not the thread that read it from IN. The elementwise launch (1-D, 256 threads
// per block) reads T one element per thread; each of its blocks reads two full 128-float rows of
// T, which four different transpose blocks wrote, so with these launch shapes the dependence is
// GLOBAL: fusion needs the exact write relation of the transpose (a per-thread loop of 4 rows)
// to see that, or to reshape the elementwise launch onto the transpose's tiles.
//
// Expected host model:
//   buffers (allocation order): d_in, d_t, d_out, each 128*64*4 = 32768 bytes.
//   copy H2D: d_in <- h_in (32768 bytes).
//   launches, no host loops:
//     transpose   grid (2,4,1)  block (32,8,1)  args (d_in, d_t, 128, 64)
//     scale_shift grid (32,1,1) block (256,1,1) args (d_t, d_out, 1.5f, 0.25f, 8192)
//   cudaDeviceSynchronize, copy D2H h_out <- d_out (32768 bytes), cudaFree of the three buffers
//   in allocation order.
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

#define TILE_DIM 32
#define BLOCK_ROWS 8
const int ROWS = 128;  // rows of the input
const int COLS = 64;   // columns of the input

// out[cols x rows] = transpose(in[rows x cols]), row-major. Block (TILE_DIM, BLOCK_ROWS).
__global__ void transpose(const float* in, float* out, int rows, int cols) {
    __shared__ float tile[TILE_DIM][TILE_DIM + 1];
    int x = blockIdx.x * TILE_DIM + threadIdx.x;  // input column
    int y = blockIdx.y * TILE_DIM + threadIdx.y;  // input row
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (x < cols && y + j < rows)
            tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * TILE_DIM + threadIdx.x;  // output column = input row
    y = blockIdx.x * TILE_DIM + threadIdx.y;  // output row = input column
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (x < rows && y + j < cols)
            out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

__global__ void scale_shift(const float* t, float* out, float a, float b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * t[i] + b;
}

int main() {
    const size_t bytes = ROWS * COLS * sizeof(float);
    float* h_in = (float*)malloc(bytes);
    float* h_out = (float*)malloc(bytes);
    for (int r = 0; r < ROWS; ++r)
        for (int c = 0; c < COLS; ++c) h_in[r * COLS + c] = (float)(r * COLS + c) * 0.5f - 100.0f;

    float *d_in, *d_t, *d_out;
    CHECK(cudaMalloc(&d_in, bytes));
    CHECK(cudaMalloc(&d_t, bytes));
    CHECK(cudaMalloc(&d_out, bytes));

    CHECK(cudaMemcpy(d_in, h_in, bytes, cudaMemcpyHostToDevice));

    dim3 block(TILE_DIM, BLOCK_ROWS);
    dim3 grid((COLS + TILE_DIM - 1) / TILE_DIM, (ROWS + TILE_DIM - 1) / TILE_DIM);
    transpose<<<grid, block>>>(d_in, d_t, ROWS, COLS);
    const float a = 1.5f, b = 0.25f;
    const int total = ROWS * COLS;
    scale_shift<<<(total + 255) / 256, 256>>>(d_t, d_out, a, b, total);
    CHECK(cudaDeviceSynchronize());

    CHECK(cudaMemcpy(h_out, d_out, bytes, cudaMemcpyDeviceToHost));

    int bad = 0;
    for (int r = 0; r < COLS; ++r) {      // rows of the transposed matrix
        for (int c = 0; c < ROWS; ++c) {  // columns of the transposed matrix
            float ref = a * h_in[c * COLS + r] + b;
            if (fabsf(h_out[r * ROWS + c] - ref) > 1e-5f * fmaxf(1.0f, fabsf(ref))) ++bad;
        }
    }
    printf("transpose_elementwise: %s (%d mismatches)\n", bad ? "FAIL" : "PASS", bad);

    CHECK(cudaFree(d_in));
    CHECK(cudaFree(d_t));
    CHECK(cudaFree(d_out));
    free(h_in);
    free(h_out);
    return 0;
}
