// __constant__ coefficients and a clang constant table read by two independent kernels, with a
// __device__ scale written by the first and read by the third.
#define N 4096
__constant__ float coef[4] = {1.0f, 2.0f, 3.0f, 4.0f};
__device__ float scale;
__global__ void k1(const float *x, float *a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] = x[i] * coef[i % 4]; if (i == 0) scale = coef[3] * 0.5f; }
__global__ void k2(const float *y, float *b, int n) { const float t[3] = {0.25f, 0.5f, 0.75f}; int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) b[i] = y[i] + coef[(i + 1) % 4] * t[i % 3]; }
__global__ void k3(float *b, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) b[i] *= scale; }
int main() {
  static float hx[N], hy[N], ha[N], hb[N]; float *x, *y, *a, *b;
  cudaMalloc(&x, N * 4); cudaMalloc(&y, N * 4); cudaMalloc(&a, N * 4); cudaMalloc(&b, N * 4);
  cudaMemcpy(x, hx, N * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(y, hy, N * 4, cudaMemcpyHostToDevice);
  k1<<<N / 256, 256>>>(x, a, N);
  k2<<<N / 256, 256>>>(y, b, N);
  k3<<<N / 256, 256>>>(b, N);
  cudaMemcpy(ha, a, N * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(hb, b, N * 4, cudaMemcpyDeviceToHost); return 0;
}
