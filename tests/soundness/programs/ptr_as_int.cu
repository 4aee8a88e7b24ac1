// A pointer stored as an integer: setp writes (unsigned long long)a into an integer buffer, k2
// casts it back.
#define N 4096
__global__ void setp(unsigned long long *tab, float *a) { tab[0] = (unsigned long long)a; }
__global__ void k1(const float *x, float *a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] = x[i] - 1.0f; }
__global__ void k2(const unsigned long long *tab, float *c, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; const float *p = (const float *)tab[0]; if (i < n) c[i] = p[n - 1 - i] * 3.0f; }
int main() {
  static float hx[N], hc[N]; float *x, *a, *c; unsigned long long *tab;
  cudaMalloc(&x, N * 4); cudaMalloc(&a, N * 4); cudaMalloc(&c, N * 4); cudaMalloc(&tab, 8);
  setp<<<1, 1>>>(tab, a);
  cudaMemcpy(x, hx, N * 4, cudaMemcpyHostToDevice);
  k1<<<N / 256, 256>>>(x, a, N);
  k2<<<N / 256, 256>>>(tab, c, N);
  cudaMemcpy(hc, c, N * 4, cudaMemcpyDeviceToHost); return 0;
}
