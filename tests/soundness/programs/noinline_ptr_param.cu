// A __device__ array written through a __noinline__ function taking a pointer and an index:
// the call site binds p = garr and i = thread index (an exact access), k2 reads it reversed.
#define N 2048
__device__ float garr[N];
__device__ __noinline__ void store_at(float *p, int i, float v) { p[i] = v; }
__global__ void k1(const float *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) store_at(garr, i, x[i] + 7.0f); }
__global__ void k2(float *c, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = garr[n - 1 - i] * 2.0f; }
int main() {
  static float hx[N], hc[N]; float *x, *c;
  cudaMalloc(&x, N * 4); cudaMalloc(&c, N * 4);
  cudaMemcpy(x, hx, N * 4, cudaMemcpyHostToDevice);
  k1<<<N / 256, 256>>>(x, N);
  k2<<<N / 256, 256>>>(c, N);
  cudaMemcpy(hc, c, N * 4, cudaMemcpyDeviceToHost); return 0;
}
