// Device-to-device symbol copies: a buffer into a __constant__ table, and half of a
// __device__ array (from byte 128) back into a buffer, asynchronously.
#include <cuda_runtime.h>
__constant__ float coef[64];
__device__ float acc[64];

__global__ void mul(const float *a) { acc[threadIdx.x] = a[threadIdx.x] * coef[threadIdx.x]; }

int main() {
  static float hc[64], out[64];
  float *d_a, *d_c;
  cudaMalloc(&d_a, 64 * sizeof(float));
  cudaMalloc(&d_c, 64 * sizeof(float));
  cudaMemcpy(d_c, hc, sizeof(hc), cudaMemcpyHostToDevice);
  cudaMemcpyToSymbol(coef, d_c, sizeof(hc), 0, cudaMemcpyDeviceToDevice);
  mul<<<1, 64>>>(d_a);
  cudaMemcpyFromSymbolAsync(d_a, acc, 32 * sizeof(float), 32 * sizeof(float),
                            cudaMemcpyDeviceToDevice, 0);
  cudaMemcpy(out, d_a, sizeof(out), cudaMemcpyDeviceToHost);
  return 0;
}
