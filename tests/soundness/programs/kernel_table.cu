// Issue 12, program A: a pointer table written by a kernel; k2 reads a only through it.
#define N 4096
__global__ void setp(float **tab, float *a) { tab[0] = a; }
__global__ void k1(const float *x, float *a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] = x[i] + 10.0f; }
__global__ void k2(float **tab, float *c, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = tab[0][n - 1 - i] * 2.0f; }
int main() {
  static float hx[N], hc[N]; float *x, *a, *c; float **tab;
  cudaMalloc(&x, N * 4); cudaMalloc(&a, N * 4); cudaMalloc(&c, N * 4); cudaMalloc(&tab, sizeof(float *));
  setp<<<1, 1>>>(tab, a); cudaDeviceSynchronize();
  cudaMemcpy(x, hx, N * 4, cudaMemcpyHostToDevice);
  k1<<<N / 256, 256>>>(x, a, N);
  k2<<<N / 256, 256>>>(tab, c, N);
  cudaMemcpy(hc, c, N * 4, cudaMemcpyDeviceToHost); return 0;
}
