// A pointer held in a __device__ variable, set by a kernel: k2 reads a through gp.
#define N 4096
__device__ float *gp;
__global__ void setp(float *a) { gp = a; }
__global__ void k1(const float *x, float *a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] = x[i] * 3.0f; }
__global__ void k2(float *c, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = gp[n - 1 - i] + 1.0f; }
int main() {
  static float hx[N], hc[N]; float *x, *a, *c;
  cudaMalloc(&x, N * 4); cudaMalloc(&a, N * 4); cudaMalloc(&c, N * 4);
  setp<<<1, 1>>>(a);
  cudaMemcpy(x, hx, N * 4, cudaMemcpyHostToDevice);
  k1<<<N / 256, 256>>>(x, a, N);
  k2<<<N / 256, 256>>>(c, N);
  cudaMemcpy(hc, c, N * 4, cudaMemcpyDeviceToHost); return 0;
}
