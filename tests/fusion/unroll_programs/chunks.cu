// A vector processed in chunks of CH elements, the last one shorter: the chunk length
// MIN(CH, TOTAL - t) is a launch argument and sizes the grid. The chunks are independent, so
// the loop is unrolled and they fuse. -DFORM=1: the minimum on unsigned values (size_t);
// -DFORM=2: std::min; -DFORM=3: a maximum (the start of the last chunk, counted from the end).
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#define TOTAL 1000
#define CH 256
#ifndef FORM
#define FORM 0
#endif
__global__ void part(float *out, const float *in, int off, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[off + i] = in[off + i] * 3.0f + (float)n;
}
int main() {
  static float h[TOTAL];
  for (int i = 0; i < TOTAL; i++) h[i] = i * 0.25f;
  float *din, *dout;
  cudaMalloc(&din, sizeof(h));
  cudaMalloc(&dout, sizeof(h));
  cudaMemcpy(din, h, sizeof(h), cudaMemcpyHostToDevice);
  for (int t = 0; t < TOTAL; t += CH) {
#if FORM == 1
    size_t left = TOTAL - t;
    int n = (int)(left < (size_t)CH ? left : (size_t)CH);
    part<<<(n + 63) / 64, 64>>>(dout, din, t, n);
#elif FORM == 2
    int n = std::min(CH, TOTAL - t);
    part<<<(n + 63) / 64, 64>>>(dout, din, t, n);
#elif FORM == 3
    int start = std::max(0, TOTAL - t - CH);  // chunks from the end: [start, TOTAL - t)
    int n = TOTAL - t - start;
    part<<<(n + 63) / 64, 64>>>(dout, din, start, n);
#else
    int n = TOTAL - t < CH ? TOTAL - t : CH;
    part<<<(n + 63) / 64, 64>>>(dout, din, t, n);
#endif
  }
  cudaMemcpy(h, dout, sizeof(h), cudaMemcpyDeviceToHost);
  printf("%f\n", h[999]);
  return 0;
}
