// A __noinline__ function with a loop over its pointer parameter: thread i scales its own row of
// 4 floats of a (p = a + 4 * i, n = 4); k2 reads the rows reversed.
#define N 1024
__device__ __noinline__ void scale_row(float *p, int n, float s) { for (int j = 0; j < n; ++j) p[j] *= s; }
__global__ void k1(float *a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) scale_row(a + 4 * i, 4, 1.5f); }
__global__ void k2(const float *a, float *c, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[4 * (n - 1 - i)] + a[4 * (n - 1 - i) + 3]; }
int main() {
  static float ha[4 * N], hc[N]; float *a, *c;
  cudaMalloc(&a, 16 * N); cudaMalloc(&c, N * 4);
  cudaMemcpy(a, ha, 16 * N, cudaMemcpyHostToDevice);
  k1<<<N / 256, 256>>>(a, N);
  k2<<<N / 256, 256>>>(a, c, N);
  cudaMemcpy(hc, c, N * 4, cudaMemcpyDeviceToHost); return 0;
}
