// A __constant__ coefficient table filled once by cudaMemcpyToSymbol, three launches that
// read it (each thread only its own elements: they fuse vertically into one kernel), and the
// results copied back from a __device__ array with cudaMemcpyFromSymbol.
#include <cuda_runtime.h>
#define N 4096
__constant__ float coef[8];
__device__ float result[N];

__global__ void scale(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * coef[i % 8];
}
__global__ void shift(const float *y, float *z, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = y[i] + coef[(i + 3) % 8];
}
__global__ void combine(const float *z, const float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) result[i] = z[i] * x[i] - coef[0];
}

int main() {
  float hc[8];
  for (int k = 0; k < 8; k++) hc[k] = 0.5f * k;
  cudaMemcpyToSymbol(coef, hc, sizeof(hc));
  static float hx[N], hr[N];
  for (int i = 0; i < N; i++) hx[i] = 0.001f * i;
  float *x, *y, *z;
  cudaMalloc(&x, N * sizeof(float));
  cudaMalloc(&y, N * sizeof(float));
  cudaMalloc(&z, N * sizeof(float));
  cudaMemcpy(x, hx, N * sizeof(float), cudaMemcpyHostToDevice);
  scale<<<N / 256, 256>>>(x, y, N);
  shift<<<N / 256, 256>>>(y, z, N);
  combine<<<N / 256, 256>>>(z, x, N);
  cudaMemcpyFromSymbol(hr, result, sizeof(hr));
  cudaFree(x);
  cudaFree(y);
  cudaFree(z);
  return 0;
}
