// Bad input: a launch under a condition on host data sirius does not know (argc).
// Compiles; host analysis must reject it at the branch.
#include <cuda_runtime.h>
__global__ void k(float* p) { p[threadIdx.x] = 1.0f; }
int main(int argc, char** argv) {
  float* d_p;
  cudaMalloc(&d_p, 1024);
  if (argc > 1)  // OFFENDING
    k<<<1, 256>>>(d_p);
  cudaFree(d_p);
  return 0;
}
