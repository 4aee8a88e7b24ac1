// A __noinline__ function called by a kernel launched in a host loop: its integer parameter is
// bound to an expression in the host loop variable (row t of a), exactly; the last kernel reads
// the rows in reverse.
#define N 1024
#define T 4
__device__ __noinline__ void put_row(float *p, int row, int i, float v) { p[row * N + i] = v; }
__global__ void fill(const float *x, float *a, int t) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < N) put_row(a, t, i, x[i] * (float)(t + 1)); }
__global__ void sum(const float *a, float *c) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < N) { float s = 0.0f; for (int t = 0; t < T; ++t) s += a[t * N + N - 1 - i]; c[i] = s; } }
int main() {
  static float hx[N], hc[N]; float *x, *a, *c;
  cudaMalloc(&x, N * 4); cudaMalloc(&a, T * N * 4); cudaMalloc(&c, N * 4);
  cudaMemcpy(x, hx, N * 4, cudaMemcpyHostToDevice);
  for (int t = 0; t < T; ++t) fill<<<N / 256, 256>>>(x, a, t);
  sum<<<N / 256, 256>>>(a, c);
  cudaMemcpy(hc, c, N * 4, cudaMemcpyDeviceToHost); return 0;
}
