#include <cuda_runtime.h>
static __device__ int count[64];
__global__ void tally(int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) count[i] = i;
}
int main() {
  tally<<<1, 64>>>(64);
  static int h[64];
  cudaMemcpyFromSymbol(h, count, sizeof(h));
  return 0;
}
