// 80 smoothing and shifting steps that swap two buffers on the host after each (a rotating address):
// with `--megakernel grid` the loop stays on the host (tests/fusion/test_device_loop.py).
#include <cuda_runtime.h>
#include <cstdio>
#define N 2048
#define T 80
__global__ void smooth(const float* a, float* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = 0.25f * a[(i + n - 1) % n] + 0.5f * a[i] + 0.25f * a[(i + 1) % n];
}
__global__ void shift(const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = 0.5f * (b[(2 * i) % n] + b[(2 * i + 1) % n]);
}
int main() {
  float *a, *b, *c;
  cudaMalloc(&a, N * sizeof(float));
  cudaMalloc(&b, N * sizeof(float));
  cudaMalloc(&c, N * sizeof(float));
  static float ab[N];
  for (int i = 0; i < N; i++) ab[i] = (i % 17) * 0.1f;
  cudaMemcpy(a, ab, sizeof ab, cudaMemcpyHostToDevice);
  for (int s = 0; s < T; s++) {
    smooth<<<N / 256, 256>>>(a, b, N);
    shift<<<N / 256, 256>>>(b, c, N);
    float* tmp = a; a = c; c = tmp;
  }
  cudaMemcpy(ab, a, sizeof ab, cudaMemcpyDeviceToHost);
  printf("%f\n", ab[0]);
  cudaFree(a); cudaFree(b); cudaFree(c);
  return 0;
}
