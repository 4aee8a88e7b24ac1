#include <stdio.h>
#include <stdlib.h>
void run_scale(float *h, int n);
int main(void) {
  int new = 256;
  float *h = malloc(new * sizeof(float));
  int i;
  for (i = 0; i < new; i++) h[i] = (float)i;
  run_scale(h, new);
  printf("%f\n", h[3]);
  free(h);
  return 0;
}
