// A recurrence of 100 steps, each two dependent launches (a GLOBAL dependence through t and
// h: every thread reads elements other blocks wrote), the step's input row x + s * N and the
// step number s as arguments. 200 launches, more than `--unroll` (64): with
// `--megakernel grid` the loop runs inside one kernel (tests/fusion/test_device_loop.py).
#include <cuda_runtime.h>
#include <cstdio>
#define N 1024
#define T 100
__global__ void mix(const float* h, float* t, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) t[i] = 0.5f * h[(i + 7) % n] + 0.25f * h[i];
}
__global__ void step(const float* t, float* h, const float* x, int n, int s) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) h[i] = t[(i * 3) % n] + x[i] + 0.001f * (float)(s % 7);
}
int main() {
  float *h, *t, *x;
  cudaMalloc(&h, N * sizeof(float));
  cudaMalloc(&t, N * sizeof(float));
  cudaMalloc(&x, T * N * sizeof(float));
  static float hb[N], xb[T * N];
  for (int i = 0; i < N; i++) hb[i] = (i % 13) * 0.01f;
  for (int i = 0; i < T * N; i++) xb[i] = (i % 29) * 0.001f;
  cudaMemcpy(h, hb, sizeof hb, cudaMemcpyHostToDevice);
  cudaMemcpy(x, xb, sizeof xb, cudaMemcpyHostToDevice);
  for (int s = 0; s < T; s++) {
    mix<<<N / 128, 128>>>(h, t, N);
    step<<<N / 128, 128>>>(t, h, x + s * N, N, s);
  }
  cudaMemcpy(hb, h, sizeof hb, cudaMemcpyDeviceToHost);
  printf("%f\n", hb[0]);
  cudaFree(h); cudaFree(t); cudaFree(x);
  return 0;
}
