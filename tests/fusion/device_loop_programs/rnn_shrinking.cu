// rnn_layers.cu with a grid that shrinks layer by layer (layer l updates the first
// N - 256 l elements of its row): the launches' shapes change with l, so they cannot be
// members of a megakernel (whose members have fixed shapes) and stay launches, with that
// reason (tests/fusion/test_device_loop.py). Written for sirius's tests.
#include <cuda_runtime.h>
#include <cstdio>
#define N 1024
#define T 20
#define L 3
__global__ void mix(const float* h, float* t, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) t[i] = 0.5f * h[(i + 7) % n] + 0.25f * h[i];
}
__global__ void step(const float* t, float* h, const float* x, int n, int c) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) h[i] = t[(i * 3) % n] + x[i] + 0.001f * (float)(c % 7);
}
int main() {
  float *h, *t, *x;
  cudaMalloc(&h, L * N * sizeof(float));
  cudaMalloc(&t, N * sizeof(float));
  cudaMalloc(&x, T * N * sizeof(float));
  static float hb[L * N], xb[T * N];
  for (int i = 0; i < L * N; i++) hb[i] = (i % 13) * 0.01f;
  for (int i = 0; i < T * N; i++) xb[i] = (i % 29) * 0.001f;
  cudaMemcpy(h, hb, sizeof hb, cudaMemcpyHostToDevice);
  cudaMemcpy(x, xb, sizeof xb, cudaMemcpyHostToDevice);
  for (int l = 0; l < L; l++) {
    for (int s = 0; s < T; s++) {
      mix<<<(N - 256 * l) / 128, 128>>>(h + l * N, t, N - 256 * l);
      step<<<(N - 256 * l) / 128, 128>>>(t, h + l * N, x + s * N, N - 256 * l, s + l);
    }
  }
  cudaMemcpy(hb, h, sizeof hb, cudaMemcpyDeviceToHost);
  printf("%f\n", hb[0]);
  cudaFree(h); cudaFree(t); cudaFree(x);
  return 0;
}
