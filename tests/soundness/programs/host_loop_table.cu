// The host fills a pointer table in a loop that does no GPU work: sirius runs the loop
// iteration by iteration, so the copy knows which device address lands in which slot.
#define N 1024
__global__ void k(float *const *tab, float *c, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = tab[0][i] + tab[3][i]; }
int main() {
  static float hc[N]; float *bufs[4], *c; float **tab; float *htab[4];
  cudaMalloc(&bufs[0], N * 4); cudaMalloc(&bufs[1], N * 4); cudaMalloc(&bufs[2], N * 4); cudaMalloc(&bufs[3], N * 4);
  cudaMalloc(&c, N * 4); cudaMalloc(&tab, sizeof(htab));
  for (int j = 0; j < 4; ++j) htab[j] = bufs[3 - j];
  cudaMemcpy(tab, htab, sizeof(htab), cudaMemcpyHostToDevice);
  k<<<N / 256, 256>>>(tab, c, N);
  cudaMemcpy(hc, c, N * 4, cudaMemcpyDeviceToHost); return 0;
}
