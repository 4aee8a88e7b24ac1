// A kernel launched once per plane of a 3-D array (the 3-D convolution idiom): the
// iterations of the host loop write disjoint planes, so they fuse into one launch.
#include <cuda_runtime.h>
#include <cstdio>
#define N 256
#ifndef P
#define P 8
#endif
__global__ void plane(float *out, const float *in, int p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[p * N + i] = in[p * N + i] * 2.0f + (float)p;
}
int main() {
  static float h[N * P];
  for (int i = 0; i < N * P; i++) h[i] = i * 0.5f;
  float *din, *dout;
  cudaMalloc(&din, sizeof(h));
  cudaMalloc(&dout, sizeof(h));
  cudaMemcpy(din, h, sizeof(h), cudaMemcpyHostToDevice);
  for (int p = 0; p < P; p++)
    plane<<<N / 64, 64>>>(dout, din, p);
  cudaMemcpy(h, dout, sizeof(h), cudaMemcpyDeviceToHost);
  printf("%f\n", h[N + 5]);
  return 0;
}
