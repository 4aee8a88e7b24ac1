// sync_chain.cu -- a chain of STEPS dependent launches whose dependence crosses blocks: step t
// reads element i + 1 of what step t - 1 wrote, so no two steps fuse locally (a GLOBAL
// dependence), and as a megakernel every step waits for the step before: a grid barrier
// (`--megakernel grid`) or a wait on the neighbouring block's flag (`counters`).
//
// Why it exists: it measures what a launch, a grid barrier and a dependence wait cost on a GPU
// (the cost model's launch overhead, grid_sync_us and wait_us), by timing the program at
// several STEPS and taking the slope (BENCHMARKS.md, "On an H200"). Each step's body is tiny
// (N floats, one load and one store each).
//
//   sirius bench kernels/micro/sync_chain.cu -D STEPS=32 [--megakernel grid|counters] ...
//
// Expected host model: buffers d_a, d_b (N * 4 bytes each), one copy in, STEPS / 2 iterations
// of a host loop launching step(d_a, d_b) then step(d_b, d_a), grid N / 256, block 256, one
// copy out of d_a.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#ifndef STEPS
#define STEPS 16
#endif
#ifndef N
#define N 32768
#endif

__global__ void step(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 0.5f * in[(i + 1) % n] + 1.0f;
}

int main() {
    float* h = (float*)malloc(N * sizeof(float));
    for (int i = 0; i < N; ++i) h[i] = (float)(i % 7);
    float *d_a, *d_b;
    cudaMalloc(&d_a, N * sizeof(float));
    cudaMalloc(&d_b, N * sizeof(float));
    cudaMemcpy(d_a, h, N * sizeof(float), cudaMemcpyHostToDevice);
    for (int t = 0; t < STEPS / 2; ++t) {
        step<<<N / 256, 256>>>(d_a, d_b, N);
        step<<<N / 256, 256>>>(d_b, d_a, N);
    }
    cudaMemcpy(h, d_a, N * sizeof(float), cudaMemcpyDeviceToHost);
    double sum = 0;
    for (int i = 0; i < N; ++i) sum += h[i];
    printf("checksum %.3f\n", sum);
    cudaFree(d_a);
    cudaFree(d_b);
    free(h);
    return 0;
}
