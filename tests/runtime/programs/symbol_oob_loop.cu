// Each iteration writes 8 bytes of the 16-byte table at byte 8 t: the third (t = 2) is
// outside it, which only the run can tell (the offset depends on the loop variable).
#include <cuda_runtime.h>
__constant__ float coef[4];

__global__ void k(float *a, int t) { a[threadIdx.x] = coef[threadIdx.x % 4] + t; }

int main() {
  float h[2] = {0.0f, 0.0f};
  float *d_a;
  cudaMalloc(&d_a, 256 * sizeof(float));
  for (int t = 0; t < 3; t++) {
    cudaMemcpyToSymbol(coef, h, sizeof(h), t * sizeof(h));
    k<<<1, 256>>>(d_a, t);
  }
  return 0;
}
