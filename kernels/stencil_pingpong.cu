// stencil_pingpong.cu -- a time-stepped 2-D Jacobi stencil with ping-pong buffers.
//
// What it covers: the classic "swap the pointers after every step" host loop. The same two
// allocations alternate between the input and the output role, so the kernel arguments at step
// t are (d_in, d_out) for even t and (d_out, d_in) for odd t. T = 5 is odd: after the loop the
// host pointer variable `d_in` holds the allocation made into `d_out`, and the device-to-host
// copy after the loop must be read from that allocation (buffer "d_out"), even though the source
// text says `d_in`. The pointers live in locals whose address was given to cudaMalloc, so the
// swap is made through memory, not only through SSA values.
//
// Why it is in the corpus: ping-pong pointers are how every iterative stencil (Rodinia hotspot,
// srad, Jacobi solvers) is written; the host model must resolve them per iteration ("rotating"
// arguments), and a fusion of consecutive steps sees a neighbourhood (GLOBAL-width) dependence.
//
// Expected host model:
//   buffers, in allocation order: d_in (NX*NY*4 = 16384 bytes), d_out (16384 bytes)
//   ops: alloc d_in; alloc d_out; copy H2D d_in <- h_u; copy H2D d_out <- h_u;
//        loop t in [0, 5) step 1 { launch jacobi2d grid (4,4,1) block (16,16,1) smem 0
//                                  args (in, out, 64, 64) with in = d_in at even t, d_out at
//                                  odd t, and out the other one }
//        sync device; copy D2H h_u <- d_out (the buffer written at t = 4);
//        free d_out; free d_in (cudaFree(d_in) comes first, and d_in now points to d_out)
//   kernel jacobi2d: no shared memory, no barriers.

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define NX 64
#define NY 64
#define T 5
#define BX 16
#define BY 16

// One Jacobi step of the 2-D Laplace equation; boundary cells keep their value.
__global__ void jacobi2d(const float* in, float* out, int nx, int ny)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny)
        return;
    int i = y * nx + x;
    if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
        out[i] = in[i];
        return;
    }
    out[i] = 0.25f * (in[i - 1] + in[i + 1] + in[i - nx] + in[i + nx]);
}

static void jacobi2d_cpu(const float* in, float* out, int nx, int ny)
{
    for (int y = 0; y < ny; ++y)
        for (int x = 0; x < nx; ++x) {
            int i = y * nx + x;
            if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1)
                out[i] = in[i];
            else
                out[i] = 0.25f * (in[i - 1] + in[i + 1] + in[i - nx] + in[i + nx]);
        }
}

int main()
{
    const size_t bytes = NX * NY * sizeof(float);
    float* h_u = (float*)malloc(bytes);
    float* h_ref = (float*)malloc(bytes);
    float* h_tmp = (float*)malloc(bytes);

    // Hot top edge, cold elsewhere, plus a deterministic interior pattern.
    for (int y = 0; y < NY; ++y)
        for (int x = 0; x < NX; ++x)
            h_u[y * NX + x] = (y == 0) ? 1.0f : (float)((x * 7 + y * 3) % 11) / 11.0f;

    float *d_in, *d_out;
    cudaMalloc(&d_in, bytes);
    cudaMalloc(&d_out, bytes);
    // Both buffers start equal so that the boundary cells are right in either role.
    cudaMemcpy(d_in, h_u, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(d_out, h_u, bytes, cudaMemcpyHostToDevice);

    dim3 block(BX, BY);
    dim3 grid((NX + BX - 1) / BX, (NY + BY - 1) / BY);
    for (int t = 0; t < T; ++t) {
        jacobi2d<<<grid, block>>>(d_in, d_out, NX, NY);
        float* tmp = d_in;
        d_in = d_out;
        d_out = tmp;
    }
    cudaDeviceSynchronize();
    // After the last swap the newest values are behind d_in (the allocation made as d_out).
    cudaMemcpy(h_u, d_in, bytes, cudaMemcpyDeviceToHost);

    // CPU reference: the same steps in the same order.
    for (int y = 0; y < NY; ++y)
        for (int x = 0; x < NX; ++x)
            h_ref[y * NX + x] = (y == 0) ? 1.0f : (float)((x * 7 + y * 3) % 11) / 11.0f;
    for (int t = 0; t < T; ++t) {
        jacobi2d_cpu(h_ref, h_tmp, NX, NY);
        float* swap = h_ref;
        h_ref = h_tmp;
        h_tmp = swap;
    }
    int bad = 0;
    for (int i = 0; i < NX * NY; ++i)
        if (fabsf(h_u[i] - h_ref[i]) > 1e-5f)
            ++bad;
    printf("stencil_pingpong: %s (%d mismatches)\n", bad ? "FAIL" : "PASS", bad);

    cudaFree(d_in);
    cudaFree(d_out);
    free(h_u);
    free(h_ref);
    free(h_tmp);
    return 0;
}
