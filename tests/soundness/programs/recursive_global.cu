// A recursive __device__ function that writes a __device__ variable: sirius does not follow the
// recursion, so k1 touches everything; k2 reads the variable.
#define N 2048
__device__ int depth_seen;
__device__ int walk(int d) { if (d <= 1) { depth_seen = 7 + d; return 1; } return walk(d - 1) + walk(d - 2); }
__global__ void k1(const int *x, int *a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] = x[i] + (i == 0 ? walk(x[0] % 4) : 0); }
__global__ void k2(int *c, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = depth_seen + i; }
int main() {
  static int hx[N], ha[N], hc[N]; int *x, *a, *c;
  cudaMalloc(&x, N * 4); cudaMalloc(&a, N * 4); cudaMalloc(&c, N * 4);
  cudaMemcpy(x, hx, N * 4, cudaMemcpyHostToDevice);
  k1<<<N / 256, 256>>>(x, a, N);
  k2<<<N / 256, 256>>>(c, N);
  cudaMemcpy(ha, a, N * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(hc, c, N * 4, cudaMemcpyDeviceToHost); return 0;
}
