// warp_vote.cu -- __ballot_sync, __any_sync, __all_sync and __activemask.
//
// 2 blocks of 48 threads: warp 0 of a block is full, warp 1 has 16 lanes (a partial warp).
// p = (in[i] > 64). Per thread i (n = 96), out[k * n + i]:
//   k = 0 ballot(activemask, p)    k = 1 any(activemask, p)     k = 2 all(activemask, p)
//   k = 3 activemask (converged)   k = 4 ballot(0x0000ffff, p) by lanes 0..15 only (0 elsewhere)
//   k = 5 activemask after lanes >= 24 returned (0xdead for the lanes that returned)
//   k = 6 ballot(activemask, p) after lanes >= 24 returned (0xdead likewise)
#include <cuda_runtime.h>

#define N 96
#define BLOCK 48
#define NOUT 7

__global__ void vote(const int* in, unsigned* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x & 31;
    int p = in[i] > 64;
    unsigned am = __activemask();
    out[0 * n + i] = __ballot_sync(am, p);
    out[1 * n + i] = __any_sync(am, p);
    out[2 * n + i] = __all_sync(am, p);
    out[3 * n + i] = am;
    unsigned sub = 0;
    if (lane < 16)
        sub = __ballot_sync(0x0000ffffu, p);
    out[4 * n + i] = sub;
    out[5 * n + i] = 0xdead;
    out[6 * n + i] = 0xdead;
    if (lane >= 24)
        return;
    unsigned am2 = __activemask();
    out[5 * n + i] = am2;
    out[6 * n + i] = __ballot_sync(am2, p);
}

int main()
{
    int *d_in;
    unsigned* d_out;
    int h_in[N];
    for (int i = 0; i < N; ++i)
        h_in[i] = (i * 37) % 128;
    cudaMalloc(&d_in, N * sizeof(int));
    cudaMalloc(&d_out, NOUT * N * sizeof(unsigned));
    cudaMemcpy(d_in, h_in, N * sizeof(int), cudaMemcpyHostToDevice);
    vote<<<N / BLOCK, BLOCK>>>(d_in, d_out, N);
    cudaDeviceSynchronize();
    cudaFree(d_in);
    cudaFree(d_out);
    return 0;
}
