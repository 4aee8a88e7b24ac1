// A pointer table written by the host and copied with cudaMemcpy: tab = {a, b}. k1 writes a,
// k2 reads a and b only through the table.
#define N 2048
__global__ void k1(const float *x, float *a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] = x[i] - 4.0f; }
__global__ void k2(float *const *tab, float *c, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = tab[0][n - 1 - i] + tab[1][i]; }
int main() {
  static float hx[N], hb[N], hc[N]; float *x, *a, *b, *c; float **tab;
  cudaMalloc(&x, N * 4); cudaMalloc(&a, N * 4); cudaMalloc(&b, N * 4); cudaMalloc(&c, N * 4);
  cudaMalloc(&tab, 2 * sizeof(float *));
  float *htab[2] = {a, b};
  cudaMemcpy(tab, htab, sizeof(htab), cudaMemcpyHostToDevice);
  cudaMemcpy(x, hx, N * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(b, hb, N * 4, cudaMemcpyHostToDevice);
  k1<<<N / 256, 256>>>(x, a, N);
  k2<<<N / 256, 256>>>(tab, c, N);
  cudaMemcpy(hc, c, N * 4, cudaMemcpyDeviceToHost); return 0;
}
