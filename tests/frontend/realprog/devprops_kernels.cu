#include <cuda_runtime.h>
__global__ void inc(int *a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] += 1;
}
extern "C" void run_inc(void) {
  int *a; cudaMalloc(&a, 512 * sizeof(int));
  cudaMemset(a, 0, 512 * sizeof(int));
  inc<<<2, 256>>>(a, 512);
  static int h[512]; cudaMemcpy(h, a, 512 * sizeof(int), cudaMemcpyDeviceToHost);
}
