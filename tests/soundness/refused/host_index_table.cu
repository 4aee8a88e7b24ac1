// The host writes a device address at an index only known at run time (argc): sirius cannot say
// which slot of the table holds it, so it refuses the copy rather than run garbage pointers.
#define N 1024
__global__ void k(float *const *tab, float *c, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = tab[0][i]; }
int main(int argc, char **argv) {
  static float hc[N]; float *a, *c; float **tab; float *htab[4] = {0, 0, 0, 0};
  cudaMalloc(&a, N * 4); cudaMalloc(&c, N * 4); cudaMalloc(&tab, sizeof(htab));
  htab[argc - 1] = a;
  cudaMemcpy(tab, htab, sizeof(htab), cudaMemcpyHostToDevice);
  k<<<N / 256, 256>>>(tab, c, N);
  cudaMemcpy(hc, c, N * 4, cudaMemcpyDeviceToHost); return 0;
}
