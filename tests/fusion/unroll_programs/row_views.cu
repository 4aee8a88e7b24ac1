// One launch per row, each given views of its own row (pointers that step by a row) and its
// row index: the loop is unrolled and the 6 launches become one repeated member whose blocks
// compute their row's pointers. -DFLOAT_ARG: the rows launched one by one (no loop), each with
// its own float weight (a float cannot step), so they stay six members of the horizontal
// kernel.
#include <cuda_runtime.h>
#define N 192
#ifndef R
#define R 6
#endif
__global__ void row(float *out, const float *in, int r, float w) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[(i + r) % N] * w + (float)r;
}
int main() {
  static float h[N * R];
  for (int i = 0; i < N * R; i++) h[i] = (i % 23) * 0.5f;
  float *din, *dout;
  cudaMalloc(&din, sizeof(h));
  cudaMalloc(&dout, sizeof(h));
  cudaMemcpy(din, h, sizeof(h), cudaMemcpyHostToDevice);
#ifdef FLOAT_ARG
  const float w[R] = {1.0f, 1.5f, 2.0f, 2.5f, 3.0f, 3.5f};
#define ROW(r) row<<<N / 64, 64>>>(dout + (r) * N, din + (r) * N, (r), w[r])
  ROW(0); ROW(1); ROW(2); ROW(3); ROW(4); ROW(5);
#else
  for (int r = 0; r < R; r++)
    row<<<N / 64, 64>>>(dout + r * N, din + r * N, r, 1.5f);
#endif
  cudaMemcpy(h, dout, sizeof(h), cudaMemcpyDeviceToHost);
  return 0;
}
