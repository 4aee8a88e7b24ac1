#include <cuda_runtime.h>
#include <stdio.h>
__global__ void inc(int *a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] += 1;
}
int main() {
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  printf("%s: clock %d kHz, overlap %d, mode %d, memory clock %d kHz, timeout %d\n", prop.name,
         prop.clockRate, prop.deviceOverlap, prop.computeMode, prop.memoryClockRate,
         prop.kernelExecTimeoutEnabled);
  int *a; cudaMalloc(&a, 512 * sizeof(int));
  cudaMemset(a, 0, 512 * sizeof(int));
  inc<<<2, 256>>>(a, 512);
  static int h[512]; cudaMemcpy(h, a, 512 * sizeof(int), cudaMemcpyDeviceToHost);
  return 0;
}
