// A __constant__ table with an initializer, read by launches big enough for several workers
// (each worker has its own copy of the module's globals), rewritten by the host between them.
#include <cuda_runtime.h>
#define N (1 << 18)
__constant__ float coef[4] = {1.0f, 2.0f, 3.0f, 4.0f};

__global__ void scale(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * coef[i % 4];
}

int main() {
  float h1[4], h2[2];
  static float out[4];
  float *d_x, *d_y0, *d_y1, *d_y2;
  cudaMalloc(&d_x, N * sizeof(float));
  cudaMalloc(&d_y0, N * sizeof(float));
  cudaMalloc(&d_y1, N * sizeof(float));
  cudaMalloc(&d_y2, N * sizeof(float));
  scale<<<N / 256, 256>>>(d_x, d_y0, N);                        // the initializer 1 2 3 4
  cudaMemcpyToSymbol(coef, h1, sizeof(h1));
  scale<<<N / 256, 256>>>(d_x, d_y1, N);                        // h1
  cudaMemcpyToSymbolAsync(coef, h2, sizeof(h2), 2 * sizeof(float), cudaMemcpyHostToDevice, 0);
  scale<<<N / 256, 256>>>(d_x, d_y2, N);                        // h1[0] h1[1] h2[0] h2[1]
  cudaMemcpyFromSymbol(out, coef, sizeof(out));
  return 0;
}
