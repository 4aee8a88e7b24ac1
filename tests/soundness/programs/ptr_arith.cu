// Pointer arithmetic on a loaded pointer: k2 reads tab[0] + n / 2 (the second half of a).
#define N 4096
__global__ void setp(float **tab, float *a) { tab[0] = a; }
__global__ void k1(const float *x, float *a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] = x[i] * x[i]; }
__global__ void k2(float **tab, float *c, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; float *p = tab[0] + n / 2; if (i < n / 2) c[i] = p[n / 2 - 1 - i]; }
int main() {
  static float hx[N], hc[N / 2]; float *x, *a, *c; float **tab;
  cudaMalloc(&x, N * 4); cudaMalloc(&a, N * 4); cudaMalloc(&c, N * 2); cudaMalloc(&tab, 8);
  setp<<<1, 1>>>(tab, a);
  cudaMemcpy(x, hx, N * 4, cudaMemcpyHostToDevice);
  k1<<<N / 256, 256>>>(x, a, N);
  k2<<<N / 256, 256>>>(tab, c, N);
  cudaMemcpy(hc, c, N * 2, cudaMemcpyDeviceToHost); return 0;
}
