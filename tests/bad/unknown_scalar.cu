// Bad input: a launch argument computed by host code sirius does not follow (rand()).
// Compiles; host analysis must reject it at the launch line (not at the kernel's definition).
#include <cstdlib>
#include <cuda_runtime.h>
__global__ void k(float* p, int n) { p[threadIdx.x] = n; }
int main() {
  float* d_p;
  cudaMalloc(&d_p, 1024);
  int n = rand() % 256;
  k<<<1, 256>>>(d_p, n);  // OFFENDING
  cudaFree(d_p);
  return 0;
}
