// A loop of one launch: 100 steps of acc = 0.9 acc + x[s] + 0.01 s (a THREAD dependence between
// iterations), more than `--unroll` launches. With `--megakernel grid|counters` the one launch
// becomes a megakernel only to take the loop inside: 100 -> 1 (tests/fusion/test_device_loop.py).
// Written for sirius's tests.
#include <cuda_runtime.h>
#include <cstdio>
#define N 2048
#define T 100
__global__ void accum(float* acc, const float* x, int n, int s) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) acc[i] = 0.9f * acc[i] + x[i] + 0.01f * (float)s;
}
int main() {
  float *acc, *x;
  static float h[N], hx[T * N];
  for (int i = 0; i < T * N; i++) hx[i] = (i % 23) * 0.01f;
  cudaMalloc(&acc, N * sizeof(float));
  cudaMalloc(&x, T * N * sizeof(float));
  cudaMemset(acc, 0, N * sizeof(float));
  cudaMemcpy(x, hx, sizeof hx, cudaMemcpyHostToDevice);
  for (int s = 0; s < T; s++)
    accum<<<N / 256, 256>>>(acc, x + s * N, N, s);
  cudaMemcpy(h, acc, sizeof h, cudaMemcpyDeviceToHost);
  printf("%f\n", h[5]);
  return 0;
}
