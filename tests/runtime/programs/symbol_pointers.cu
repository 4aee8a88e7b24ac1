// A __device__ table of device pointers filled by cudaMemcpyToSymbol from host memory that
// holds the addresses of two buffers: the kernel reaches the buffers through the table.
#include <cuda_runtime.h>
__device__ float *bufs[2];

__global__ void twice(int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) bufs[1][i] = 2.0f * bufs[0][i];
}

int main() {
  float *d_a, *d_b;
  cudaMalloc(&d_a, 1024 * sizeof(float));
  cudaMalloc(&d_b, 1024 * sizeof(float));
  float *h[2] = {d_a, d_b};
  cudaMemcpyToSymbol(bufs, h, sizeof(h));
  twice<<<4, 256>>>(1024);
  static float out[1024];
  cudaMemcpy(out, d_b, sizeof(out), cudaMemcpyDeviceToHost);
  return 0;
}
