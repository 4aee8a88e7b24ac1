// An outer time loop whose steps depend on each other, and inside each step two loops of
// independent row launches: the inner loops are unrolled (the outer one stays a loop), so the
// rows of one step fuse; the steps stay apart.
#include <cuda_runtime.h>
#define N 128
#define R 4
#define T 3
__global__ void scale(float *dst, const float *src, int r) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  dst[r * N + i] = src[r * N + (i + 3) % N] * 0.75f + (float)r;
}
int main() {
  static float h[N * R];
  for (int i = 0; i < N * R; i++) h[i] = (i % 17) * 0.25f;
  float *a, *b;
  cudaMalloc(&a, sizeof(h));
  cudaMalloc(&b, sizeof(h));
  cudaMemcpy(a, h, sizeof(h), cudaMemcpyHostToDevice);
  for (int t = 0; t < T; t++) {
    for (int r = 0; r < R; r++)
      scale<<<N / 32, 32>>>(b, a, r);
    for (int r = 0; r < R; r++)
      scale<<<N / 32, 32>>>(a, b, r);
  }
  cudaMemcpy(h, a, sizeof(h), cudaMemcpyDeviceToHost);
  return 0;
}
