// Launches that do nothing the program observes. -DCASE=0: `debug` fills a scratch buffer
// nobody reads (dead), and `scale` runs twice on the same inputs (the second is a repeat).
// -DCASE=1: between the two `scale` launches `bump` changes their input: both stay.
// -DCASE=2: `accum` reads what it writes (x += 1): running it twice is not running it once.
// -DCASE=3: the scratch buffer is copied back: `debug` is not dead.
// -DCASE=4: `copyout` reads `out` between the two `scale` launches: the first is not dead, and
// the second repeats it (nothing in between writes `in` or `out`): it is removed.
// -DCASE=6: as 4, but `bump` also changes `out` in between: the second `scale` stays.
// -DCASE=5: `debug` also prints: a launch with an effect outside memory is kept.
#include <cuda_runtime.h>
#include <cstdio>
#define N 1024
#ifndef CASE
#define CASE 0
#endif
__global__ void scale(float *out, const float *in, float s) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[i] * s;
}
__global__ void debug(float *scratch, const float *in) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  scratch[i] = in[i] + 100.0f;
#if CASE == 5
  if (i == 0) printf("debug %f\n", scratch[0]);
#endif
}
__global__ void copyout(float *dst, const float *src) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  dst[i] = src[(i + 1) % N];
}
__global__ void bump(float *in) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  in[i] = in[i] + 1.0f;
}
__global__ void accum(float *x) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  x[i] = x[i] + 1.0f;
}
int main() {
  static float h[N];
  for (int i = 0; i < N; i++) h[i] = i * 0.5f;
  float *in, *out, *scratch, *out2;
  cudaMalloc(&out2, sizeof(h));
  cudaMalloc(&in, sizeof(h));
  cudaMalloc(&out, sizeof(h));
  cudaMalloc(&scratch, sizeof(h));
  cudaMemcpy(in, h, sizeof(h), cudaMemcpyHostToDevice);
  debug<<<N / 256, 256>>>(scratch, in);
  scale<<<N / 256, 256>>>(out, in, 2.0f);
#if CASE == 1
  bump<<<N / 256, 256>>>(in);
#endif
#if CASE == 4 || CASE == 6
  copyout<<<N / 256, 256>>>(out2, out);
#endif
#if CASE == 6
  bump<<<N / 256, 256>>>(out);
#endif
#if CASE == 2
  accum<<<N / 256, 256>>>(out);
  accum<<<N / 256, 256>>>(out);
#else
  scale<<<N / 256, 256>>>(out, in, 2.0f);
#endif
  cudaMemcpy(h, out, sizeof(h), cudaMemcpyDeviceToHost);
#if CASE == 3
  cudaMemcpy(h, scratch, sizeof(h), cudaMemcpyDeviceToHost);
#endif
#if CASE == 4 || CASE == 6
  cudaMemcpy(h, out2, sizeof(h), cudaMemcpyDeviceToHost);
#endif
  printf("%f\n", h[3]);
  return 0;
}
