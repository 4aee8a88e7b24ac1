#include <cuda_runtime.h>
#include <stdio.h>
__global__ void fill(float *a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = (float)i;
}
__attribute__((noinline)) void setup(int *n, int verbose) {
  *n = 1024;
  if (verbose) printf("n = %d\n", *n);
}
int main(int argc, char **argv) {
  int n;
  setup(&n, argc > 5);
  float *a; cudaMalloc(&a, n * sizeof(float));
  fill<<<(n + 255) / 256, 256>>>(a, n);
  static float h[1024]; cudaMemcpy(h, a, n * sizeof(float), cudaMemcpyDeviceToHost);
  return 0;
}
