// A kernel-written pointer table travels: copied back to the host and up again into tab2, and
// copied device-to-device into tab3; k2 reads a through tab2, k3 through tab3.
#define N 2048
__global__ void setp(float **tab, float *a) { tab[0] = a; }
__global__ void k1(const float *x, float *a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] = x[i] + 3.0f; }
__global__ void k2(float **tab2, float *c, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = tab2[0][n - 1 - i]; }
__global__ void k3(float **tab3, float *d, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) d[i] = tab3[0][i] * 2.0f; }
int main() {
  static float hx[N], hc[N], hd[N]; float *x, *a, *c, *d; float **tab, **tab2, **tab3; float *htab[1];
  cudaMalloc(&x, N * 4); cudaMalloc(&a, N * 4); cudaMalloc(&c, N * 4); cudaMalloc(&d, N * 4);
  cudaMalloc(&tab, 8); cudaMalloc(&tab2, 8); cudaMalloc(&tab3, 8);
  setp<<<1, 1>>>(tab, a);
  cudaMemcpy(htab, tab, 8, cudaMemcpyDeviceToHost);
  cudaMemcpy(tab2, htab, 8, cudaMemcpyHostToDevice);
  cudaMemcpy(tab3, tab, 8, cudaMemcpyDeviceToDevice);
  cudaMemcpy(x, hx, N * 4, cudaMemcpyHostToDevice);
  k1<<<N / 256, 256>>>(x, a, N);
  k2<<<N / 256, 256>>>(tab2, c, N);
  k3<<<N / 256, 256>>>(tab3, d, N);
  cudaMemcpy(hc, c, N * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(hd, d, N * 4, cudaMemcpyDeviceToHost); return 0;
}
