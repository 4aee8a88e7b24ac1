// A __device__ pointer variable whose initializer holds the address of a __device__ array:
// k1 writes garr directly, k2 reads it through gp.
#define N 1024
__device__ float garr[N];
__device__ float *gp = garr;
__global__ void k1(const float *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) garr[i] = x[i] + 2.0f; }
__global__ void k2(float *c, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = gp[n - 1 - i] * 5.0f; }
int main() {
  static float hx[N], hc[N]; float *x, *c;
  cudaMalloc(&x, N * 4); cudaMalloc(&c, N * 4);
  cudaMemcpy(x, hx, N * 4, cudaMemcpyHostToDevice);
  k1<<<N / 256, 256>>>(x, N);
  k2<<<N / 256, 256>>>(c, N);
  cudaMemcpy(hc, c, N * 4, cudaMemcpyDeviceToHost); return 0;
}
