#include <cuda_runtime.h>
texture<float, 1, cudaReadModeElementType> tex;
__global__ void copy(float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1Dfetch(tex, i);
}
int main() {
  float *in, *out;
  cudaMalloc(&in, 1024 * 4); cudaMalloc(&out, 1024 * 4);
  cudaBindTexture(0, tex, in, 1024 * 4);
  copy<<<4, 256>>>(out, 1024);
  return 0;
}
