// Inline PTX that stores: k1 writes the __device__ variable g with st.global; k2 reads it.
#define N 4096
__device__ float g;
__global__ void k1(const float *a, float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = a[i] + 1.0f;
  if (i == n - 1) asm volatile("st.global.f32 [%0], %1;" :: "l"(&g), "f"(a[i] * 3.0f) : "memory");
}
__global__ void k2(const float *x, float *c, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = x[i] * g; }
int main() {
  static float ha[N], hb[N], hx[N], hc[N]; float *a, *b, *x, *c;
  cudaMalloc(&a, N * 4); cudaMalloc(&b, N * 4); cudaMalloc(&x, N * 4); cudaMalloc(&c, N * 4);
  cudaMemcpy(a, ha, N * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(x, hx, N * 4, cudaMemcpyHostToDevice);
  k1<<<N / 256, 256>>>(a, b, N);
  k2<<<N / 256, 256>>>(x, c, N);
  cudaMemcpy(hb, b, N * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(hc, c, N * 4, cudaMemcpyDeviceToHost); return 0;
}
