#include <cuda_runtime.h>
__constant__ float coef[4];
float hostarr[4];
__global__ void k(float *a) { a[threadIdx.x] = coef[threadIdx.x % 4]; }
int main() {
  float h[2] = {0.0f, 0.0f};
  float *a;
  cudaMalloc(&a, 256 * 4);
#ifdef HOST_ARRAY
  cudaMemcpyToSymbol(hostarr, h, sizeof(h));
#elif defined(WRONG_WAY)
  cudaMemcpyToSymbol(coef, h, sizeof(h), 0, cudaMemcpyDeviceToHost);
#elif defined(DEVICE_SOURCE)
  cudaMemcpyToSymbol(coef, a, 8, 0, cudaMemcpyHostToDevice);
#else
  cudaMemcpyToSymbol(coef[2], h, sizeof(h));  // an element: byte offset 8
#endif
  k<<<1, 256>>>(a);
  return 0;
}
