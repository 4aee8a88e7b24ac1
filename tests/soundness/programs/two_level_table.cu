// A two-level pointer table: tt[0] = tab, tab[0] = a (both stored by a kernel); k2 reads
// tt[0][0][i].
#define N 4096
__global__ void setp(float ***tt, float **tab, float *a) { tab[0] = a; tt[0] = tab; }
__global__ void k1(const float *x, float *a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] = x[i] + 0.5f; }
__global__ void k2(float ***tt, float *c, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = tt[0][0][n - 1 - i] * 4.0f; }
int main() {
  static float hx[N], hc[N]; float *x, *a, *c; float **tab; float ***tt;
  cudaMalloc(&x, N * 4); cudaMalloc(&a, N * 4); cudaMalloc(&c, N * 4);
  cudaMalloc(&tab, 8); cudaMalloc(&tt, 8);
  setp<<<1, 1>>>(tt, tab, a);
  cudaMemcpy(x, hx, N * 4, cudaMemcpyHostToDevice);
  k1<<<N / 256, 256>>>(x, a, N);
  k2<<<N / 256, 256>>>(tt, c, N);
  cudaMemcpy(hc, c, N * 4, cudaMemcpyDeviceToHost); return 0;
}
