#include <cuda_runtime.h>
__constant__ float coef[4];
__global__ void k(float *a) { a[threadIdx.x] = coef[threadIdx.x % 4]; }
int main() {
  float h[8] = {0};
  float *a; cudaMalloc(&a, 256 * 4);
  cudaMemcpyToSymbol(coef, h, sizeof(h));
  k<<<1, 256>>>(a);
  return 0;
}
