// converge_loop.cu -- iterate until converged: a do/while loop whose trip count depends on data.
//
// What it covers: Jacobi iterations for the tridiagonal system x[i] + 0.25*(x[i-1] + x[i+1]) =
// b[i] (diagonally dominant: the error halves every step, ~20 steps to converge). Each step
// clears a device flag with cudaMemset, runs `relax` (which sets the flag when some element still
// moves by more than TOL), swaps the ping-pong pointers, and copies the flag back to the host;
// the loop runs `while (h_flag && iters < 100)`. The bound 100 does not make the trip count
// known: the flag is data. So the host model must hold an OPAQUE loop (hi = null, a synthetic
// variable whose name starts with "_", lo = 0, step = 1) whose body is still analysed, with the
// ping-pong arguments rotating with that synthetic variable.
//
// Why it is in the corpus: convergence loops are how solvers (and Rodinia's bfs, which loops
// while a "changed" flag is set) drive the GPU; an extractor that guessed a count from the
// `iters < 100` bound would be unsound, one that gave up on the loop would lose the launch.
//
// Expected host model (N = 1000):
//   buffers, in allocation order: d_x, d_y, d_b (N*4 = 4000 bytes each), d_flag (4 bytes)
//   ops: 4 allocs; copy H2D d_x <- h_x (4000); copy H2D d_b <- h_b (4000);
//        opaque loop _k (k = 0, 1, ...) {
//            memset d_flag 0 (4 bytes);
//            launch relax grid (8,1,1) block (128,1,1) smem 0 args (x, d_b, y, d_flag, 1000)
//                   where (x, y) = (d_x, d_y) at even k and (d_y, d_x) at odd k;
//            copy D2H h_flag <- d_flag (4 bytes) }
//        sync device; copy D2H h_x <- (d_x or d_y, whichever the last step wrote: data-dependent)
//        (4000 bytes); 4 frees
//   kernel relax: no shared memory, no barriers.

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

#define N 1000
#define BLOCK 128
#define MAX_ITERS 100
#define TOL 1e-5f

// One Jacobi step: y[i] = b[i] - 0.25 * (x[i-1] + x[i+1]) (x outside [0, n) is zero).
// Sets *flag when the element moved by more than TOL (every writer stores the same value).
__global__ void relax(const float* x, const float* b, float* y, int* flag, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float left = (i > 0) ? x[i - 1] : 0.0f;
    float right = (i < n - 1) ? x[i + 1] : 0.0f;
    float v = b[i] - 0.25f * (left + right);
    y[i] = v;
    if (fabsf(v - x[i]) > TOL)
        *flag = 1;
}

int main()
{
    const size_t bytes = N * sizeof(float);
    float* h_x = (float*)malloc(bytes);
    float* h_b = (float*)malloc(bytes);
    float* r_x = (float*)malloc(bytes);
    float* r_y = (float*)malloc(bytes);
    for (int i = 0; i < N; ++i) {
        h_x[i] = 0.0f;
        h_b[i] = (float)(i % 10) / 10.0f + 0.5f;
    }

    float *d_x, *d_y, *d_b;
    int* d_flag;
    CUDA_CHECK(cudaMalloc(&d_x, bytes));
    CUDA_CHECK(cudaMalloc(&d_y, bytes));
    CUDA_CHECK(cudaMalloc(&d_b, bytes));
    CUDA_CHECK(cudaMalloc(&d_flag, sizeof(int)));
    CUDA_CHECK(cudaMemcpy(d_x, h_x, bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_b, h_b, bytes, cudaMemcpyHostToDevice));

    int h_flag = 0;
    int iters = 0;
    do {
        CUDA_CHECK(cudaMemset(d_flag, 0, sizeof(int)));
        relax<<<(N + BLOCK - 1) / BLOCK, BLOCK>>>(d_x, d_b, d_y, d_flag, N);
        float* tmp = d_x;  // the newest values are now behind d_x
        d_x = d_y;
        d_y = tmp;
        CUDA_CHECK(cudaMemcpy(&h_flag, d_flag, sizeof(int), cudaMemcpyDeviceToHost));
        iters++;
    } while (h_flag && iters < MAX_ITERS);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h_x, d_x, bytes, cudaMemcpyDeviceToHost));

    // CPU reference: the same iteration with the same stopping rule.
    for (int i = 0; i < N; ++i)
        r_x[i] = 0.0f;
    int r_iters = 0;
    int moved = 0;
    do {
        moved = 0;
        for (int i = 0; i < N; ++i) {
            float left = (i > 0) ? r_x[i - 1] : 0.0f;
            float right = (i < N - 1) ? r_x[i + 1] : 0.0f;
            float v = h_b[i] - 0.25f * (left + right);
            r_y[i] = v;
            if (fabsf(v - r_x[i]) > TOL)
                moved = 1;
        }
        float* swap = r_x;
        r_x = r_y;
        r_y = swap;
        r_iters++;
    } while (moved && r_iters < MAX_ITERS);
    int bad = 0;
    for (int i = 0; i < N; ++i)
        if (fabsf(h_x[i] - r_x[i]) > 1e-4f)
            ++bad;
    printf("converge_loop: %s after %d iterations (CPU %d), %d mismatches\n",
           (bad == 0 && iters < MAX_ITERS) ? "PASS" : "FAIL", iters, r_iters, bad);

    CUDA_CHECK(cudaFree(d_x));
    CUDA_CHECK(cudaFree(d_y));
    CUDA_CHECK(cudaFree(d_b));
    CUDA_CHECK(cudaFree(d_flag));
    free(h_x);
    free(h_b);
    free(r_x);
    free(r_y);
    return 0;
}
