// A __device__ array written in a __noinline__ helper (reached through nothing but the global's
// name) and read directly by the next kernel, reversed.
#define N 2048
__device__ float gbuf[N];
__device__ __noinline__ void put(int i, float v) { gbuf[i] = v; }
__global__ void k1(const float *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) put(i, x[i] * 0.5f); }
__global__ void k2(float *c, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = gbuf[n - 1 - i] + 1.0f; }
int main() {
  static float hx[N], hc[N]; float *x, *c;
  cudaMalloc(&x, N * 4); cudaMalloc(&c, N * 4);
  cudaMemcpy(x, hx, N * 4, cudaMemcpyHostToDevice);
  k1<<<N / 256, 256>>>(x, N);
  k2<<<N / 256, 256>>>(c, N);
  cudaMemcpy(hc, c, N * 4, cudaMemcpyDeviceToHost); return 0;
}
