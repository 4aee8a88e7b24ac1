#include <cuda_runtime.h>
__constant__ float coef[4];
__device__ float total[256];
__global__ void apply(float *a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { a[i] = a[i] * coef[i % 4]; total[i] = a[i] + 1.0f; }
}
int main() {
  float h[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  cudaMemcpyToSymbol(coef, h, sizeof(h));
  float *a; cudaMalloc(&a, 256 * 4);
  static float ha[256];
  for (int i = 0; i < 256; i++) ha[i] = 1.0f;
  cudaMemcpy(a, ha, 256 * 4, cudaMemcpyHostToDevice);
  apply<<<1, 256>>>(a, 256);
  cudaMemcpy(ha, a, 256 * 4, cudaMemcpyDeviceToHost);
  static float ht[256];
  cudaMemcpyFromSymbol(ht, total, sizeof(ht));
  return 0;
}
