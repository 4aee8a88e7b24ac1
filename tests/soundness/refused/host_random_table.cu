// The host fills a pointer table in a loop whose branch depends on data it does not know
// (rand()): the loop cannot be run ahead of time, and the copy of the table is refused.
#include <cstdlib>
#define N 1024
__global__ void k(float *const *tab, float *c, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = tab[0][i] + tab[1][i]; }
int main() {
  static float hc[N]; float *a, *b, *c; float **tab; float *htab[2];
  cudaMalloc(&a, N * 4); cudaMalloc(&b, N * 4); cudaMalloc(&c, N * 4); cudaMalloc(&tab, sizeof(htab));
  for (int j = 0; j < 2; ++j) htab[j] = (rand() & 1) ? a : b;
  cudaMemcpy(tab, htab, sizeof(htab), cudaMemcpyHostToDevice);
  k<<<N / 256, 256>>>(tab, c, N);
  cudaMemcpy(hc, c, N * 4, cudaMemcpyDeviceToHost); return 0;
}
