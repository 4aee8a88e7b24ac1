// warp_divergent.cu -- warp operations in divergent code, and __activemask with idle lanes.
//
// split (1 block of 32 threads, fibers): lanes 0..15 first do a half-warp shuffle
//   x = __shfl_down_sync(0x0000ffff, v, 1, 16)   (lane 15 keeps its own v: width 16)
// while lanes 16..31 skip it; then ALL lanes do the full-warp shuffle
//   b = __shfl_sync(0xffffffff, w, 0) with w = 1000 + v,
// so a[l] = v[l + 1] for l < 15, a[15] = v[15], a[l] = -1 for l >= 16, and b[l] = 1000 + v[0].
// Both shuffles are well-defined: every non-exited lane named in each mask executes it.
//
// am_only (1 block of 48 threads; __activemask is its only warp operation): am[t] = the mask
// of lanes present in t's warp (warp 1 has lanes 0..15 only), and after lanes >= 24 of each
// warp returned, am2[t] = __activemask() for the lanes that remain (0xdead for the others):
// warp 0 -> 0x00ffffff, warp 1 -> 0x0000ffff.
#include <cuda_runtime.h>

__global__ void split(const int* in, int* a, int* b)
{
    int lane = threadIdx.x & 31;
    int v = in[threadIdx.x];
    int w = 1000 + v;
    int x = -1;
    if (lane < 16)
        x = __shfl_down_sync(0x0000ffffu, v, 1, 16);
    a[threadIdx.x] = x;
    b[threadIdx.x] = __shfl_sync(0xffffffffu, w, 0);
}

__global__ void am_only(unsigned* am, unsigned* am2)
{
    int t = threadIdx.x;
    am[t] = __activemask();
    am2[t] = 0xdead;
    if ((t & 31) >= 24)
        return;
    am2[t] = __activemask();
}

int main()
{
    int *d_in, *d_a, *d_b;
    unsigned *d_am, *d_am2;
    cudaMalloc(&d_in, 32 * sizeof(int));
    cudaMalloc(&d_a, 32 * sizeof(int));
    cudaMalloc(&d_b, 32 * sizeof(int));
    cudaMalloc(&d_am, 48 * sizeof(unsigned));
    cudaMalloc(&d_am2, 48 * sizeof(unsigned));
    split<<<1, 32>>>(d_in, d_a, d_b);
    am_only<<<1, 48>>>(d_am, d_am2);
    cudaDeviceSynchronize();
    cudaFree(d_in);
    cudaFree(d_a);
    cudaFree(d_b);
    cudaFree(d_am);
    cudaFree(d_am2);
    return 0;
}
