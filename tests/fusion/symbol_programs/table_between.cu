// A symbol copy between two launches that both read the table: the second half of `coef` is
// replaced (byte offset 16) after `scale` and before `shift`, so `shift` must see the new
// values and `scale` the old ones; the launches must not be fused across the copy.
#include <cuda_runtime.h>
#define N 2048
__constant__ float coef[8];

__global__ void scale(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * coef[i % 8];
}
__global__ void shift(const float *y, float *z, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = y[i] + coef[i % 8];
}

int main() {
  float first[8], second[4];
  for (int k = 0; k < 8; k++) first[k] = 1.0f + k;
  for (int k = 0; k < 4; k++) second[k] = -10.0f * k;
  static float hx[N], hz[N];
  float *x, *y, *z;
  cudaMalloc(&x, N * sizeof(float));
  cudaMalloc(&y, N * sizeof(float));
  cudaMalloc(&z, N * sizeof(float));
  cudaMemcpy(x, hx, N * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpyToSymbol(coef, first, sizeof(first));
  scale<<<N / 256, 256>>>(x, y, N);
  cudaMemcpyToSymbol(coef, second, sizeof(second), 4 * sizeof(float));
  shift<<<N / 256, 256>>>(y, z, N);
  cudaMemcpy(hz, z, N * sizeof(float), cudaMemcpyDeviceToHost);
  return 0;
}
