#include <stdio.h>
#include <cuda_runtime_api.h>
void run_inc(void);
int main(void) {
  struct cudaDeviceProp prop;
  int new = 0;
  cudaGetDeviceProperties(&prop, new);
  printf("%s %d %d %d\n", prop.name, prop.clockRate, prop.deviceOverlap, prop.computeMode);
  run_inc();
  return 0;
}
