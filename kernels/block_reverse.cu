// block_reverse.cu -- a map into a temporary, then a blend of each element with its mirror
// image within the block's 256-element segment (a reversal per block, as in a block-local
// permutation or a butterfly stage), 16 blocks of 256 threads.
//
// Why it is in the corpus: consume reads t at an element another thread of the same block
// wrote, so the dependence produce -> consume is BLOCK wide: fused vertically with a barrier
// between the two, and t, read by nothing else and never copied back, is a dead intermediate
// that each block writes and reads within its own 1 KiB slice. The `contract-shared`
// post-fusion pass keeps that slice in the block's shared memory and removes t from the
// program (docs/passes.md; tests/postopt/test_contract_shared.py has the same kernels).
// Written for sirius's corpus.
#include <cuda_runtime.h>
#include <cstdio>
#define N 4096
#define B 256
__global__ void produce(const float* x, float* t) {
  int i = blockIdx.x * B + threadIdx.x;
  t[i] = x[i] * 2.0f + 1.0f;
}
__global__ void consume(const float* t, float* y) {
  int i = blockIdx.x * B + threadIdx.x;
  int j = blockIdx.x * B + (B - 1 - threadIdx.x);
  y[i] = t[j] + 0.5f * t[i];
}
int main() {
  float *x, *t, *y;
  static float hx[N], hy[N];
  for (int i = 0; i < N; i++) hx[i] = (i % 17) * 0.25f;
  cudaMalloc(&x, N * sizeof(float));
  cudaMalloc(&t, N * sizeof(float));
  cudaMalloc(&y, N * sizeof(float));
  cudaMemcpy(x, hx, sizeof hx, cudaMemcpyHostToDevice);
  produce<<<N / B, B>>>(x, t);
  consume<<<N / B, B>>>(t, y);
  cudaMemcpy(hy, y, sizeof hy, cudaMemcpyDeviceToHost);
  double s = 0;
  for (int i = 0; i < N; i++) s += hy[i];
  printf("%f\n", s);
  cudaFree(x); cudaFree(t); cudaFree(y);
  return 0;
}
