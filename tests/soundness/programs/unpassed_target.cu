// A table whose target is passed to no kernel as an argument: the host puts a's address in
// tab; k1 writes a through the table, k2 reads it through the table, reversed.
#define N 2048
__global__ void k1(float *const *tab, const float *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) tab[0][i] = x[i] * 2.0f + 1.0f; }
__global__ void k2(float *const *tab, float *c, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = tab[0][n - 1 - i]; }
int main() {
  static float hx[N], hc[N], ha[N]; float *x, *a, *c; float **tab;
  cudaMalloc(&x, N * 4); cudaMalloc(&a, N * 4); cudaMalloc(&c, N * 4); cudaMalloc(&tab, 8);
  cudaMemcpy(tab, &a, sizeof(float *), cudaMemcpyHostToDevice);
  cudaMemcpy(x, hx, N * 4, cudaMemcpyHostToDevice);
  k1<<<N / 256, 256>>>(tab, x, N);
  k2<<<N / 256, 256>>>(tab, c, N);
  cudaMemcpy(hc, c, N * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(ha, a, N * 4, cudaMemcpyDeviceToHost); return 0;
}
