#include <cuda_runtime.h>
__global__ void inc(int *a) { a[blockIdx.x * blockDim.x + threadIdx.x] += 1; }
int main() {
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  int blocks = prop.clockRate / 1000;
  int *a; cudaMalloc(&a, 256 * sizeof(int));
  inc<<<blocks, 256>>>(a);
  return 0;
}
