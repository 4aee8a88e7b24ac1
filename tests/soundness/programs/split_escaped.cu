// A temporary whose address sits in a pointer table, reused: k0 writes it and r0 reads it, then
// k1 overwrites all of it and k2 reads it directly and through the table. Giving k1 and k2 a fresh copy of
// the buffer (storage splitting removes the false dependences on a reused temporary) would leave
// the table pointing at the old one: a buffer whose address escapes into memory is never split.
#define N 4096
__global__ void setp(float **tab, float *a) { tab[0] = a; }
__global__ void k0(const float *x, float *a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] = x[i] + 1.0f; }
__global__ void r0(const float *a, float *d, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) d[i] = a[i] * a[i]; }
__global__ void k1(const float *x, float *a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] = x[i] * 2.0f; }
__global__ void k2(float **tab, const float *a, float *c, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = tab[0][n - 1 - i] - a[i]; }
int main() {
  static float hx[N], hc[N], hd[N]; float *x, *a, *c, *d; float **tab;
  cudaMalloc(&x, N * 4); cudaMalloc(&a, N * 4); cudaMalloc(&c, N * 4); cudaMalloc(&d, N * 4);
  cudaMalloc(&tab, 8);
  cudaMemcpy(x, hx, N * 4, cudaMemcpyHostToDevice);
  setp<<<1, 1>>>(tab, a);
  k0<<<N / 256, 256>>>(x, a, N);
  r0<<<N / 256, 256>>>(a, d, N);
  k1<<<N / 256, 256>>>(x, a, N);
  k2<<<N / 256, 256>>>(tab, a, c, N);
  cudaMemcpy(hc, c, N * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(hd, d, N * 4, cudaMemcpyDeviceToHost); return 0;
}
