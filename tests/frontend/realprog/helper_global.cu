#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
__global__ void fill(float *a, float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = 2.0f * b[i];
}
/* sizes and host data set up by a helper that does no GPU work, through globals */
int N;
float *data;
void setup() {
  N = 1024;
  data = (float *)malloc(N * sizeof(float));
  for (int i = 0; i < N; i++) data[i] = rand() / (float)RAND_MAX;
  printf("size %d\n", N);
}
int main() {
  setup();
  float *a, *b;
  cudaMalloc(&a, N * sizeof(float));
  cudaMalloc(&b, N * sizeof(float));
  cudaMemcpy(b, data, N * sizeof(float), cudaMemcpyHostToDevice);
  fill<<<(N + 255) / 256, 256>>>(a, b, N);
  cudaMemcpy(data, a, N * sizeof(float), cudaMemcpyDeviceToHost);
  return 0;
}
