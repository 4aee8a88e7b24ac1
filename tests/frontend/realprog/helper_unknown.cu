#include <cuda_runtime.h>
#include <stdio.h>
__global__ void fill(float *a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = 1.0f;
}
/* the size is read from a file: sirius cannot know it */
__attribute__((noinline)) void read_size(const char *path, int *n) {
  *n = 256;
  FILE *f = fopen(path, "r");
  if (f) { fscanf(f, "%d", n); fclose(f); }
}
int main() {
  int n;
  read_size("size.txt", &n);
  float *a; cudaMalloc(&a, n * sizeof(float));
  fill<<<(n + 255) / 256, 256>>>(a, n);
  return 0;
}
