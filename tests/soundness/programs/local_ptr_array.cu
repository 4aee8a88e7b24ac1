// Pointers kept in a thread-private array indexed by data: k2 reads a or b through ptrs[sel],
// sel loaded from memory (the local array stays in memory: its index is not a constant).
#define N 2048
__global__ void k1(const float *x, float *a, float *b, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) { a[i] = x[i] + 1.0f; b[i] = x[i] - 1.0f; } }
__global__ void k2(const float *a, const float *b, const int *sel, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  const float *volatile ptrs[2] = {a, b};
  if (i < n) c[i] = ptrs[sel[i] & 1][n - 1 - i];
}
int main() {
  static float hx[N], hc[N]; static int hs[N]; float *x, *a, *b, *c; int *sel;
  cudaMalloc(&x, N * 4); cudaMalloc(&a, N * 4); cudaMalloc(&b, N * 4); cudaMalloc(&c, N * 4);
  cudaMalloc(&sel, N * 4);
  cudaMemcpy(x, hx, N * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(sel, hs, N * 4, cudaMemcpyHostToDevice);
  k1<<<N / 256, 256>>>(x, a, b, N);
  k2<<<N / 256, 256>>>(a, b, sel, c, N);
  cudaMemcpy(hc, c, N * 4, cudaMemcpyDeviceToHost); return 0;
}
