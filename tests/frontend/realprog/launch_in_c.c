#include <stdio.h>
/* a kernel <<<launch>>> in a comment is not code */
__global__ void twice(float *a) { a[threadIdx.x] *= 2.0f; }
int main(void) {
  printf("<<<not a launch>>>\n");
  return 0;
}
