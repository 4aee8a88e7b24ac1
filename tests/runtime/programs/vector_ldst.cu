// vector_ldst.cu -- float4 and float2 vector loads and stores (16- and 8-byte accesses).
//
// n = 1024 floats = 256 float4 = 512 float2; 64-thread blocks.
//   vec4: out4[j] = (2 v.w, v.z + 1, v.y, -v.x) for v = in4[j], j < 256   (4 blocks)
//   vec2: out2[j] = (v.y, v.x * v.y) for v = in2[j], j < 512              (8 blocks)
#include <cuda_runtime.h>

#define N 1024
#define BLOCK 64

__global__ void vec4(const float* in, float* out, int n4)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < n4) {
        float4 v = reinterpret_cast<const float4*>(in)[j];
        reinterpret_cast<float4*>(out)[j] = make_float4(2.0f * v.w, v.z + 1.0f, v.y, -v.x);
    }
}

__global__ void vec2(const float* in, float* out, int n2)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < n2) {
        float2 v = reinterpret_cast<const float2*>(in)[j];
        reinterpret_cast<float2*>(out)[j] = make_float2(v.y, v.x * v.y);
    }
}

int main()
{
    float *d_in, *d_out4, *d_out2;
    float h_in[N];
    for (int i = 0; i < N; ++i)
        h_in[i] = (float)i;
    cudaMalloc(&d_in, N * sizeof(float));
    cudaMalloc(&d_out4, N * sizeof(float));
    cudaMalloc(&d_out2, N * sizeof(float));
    cudaMemcpy(d_in, h_in, N * sizeof(float), cudaMemcpyHostToDevice);
    vec4<<<N / 4 / BLOCK, BLOCK>>>(d_in, d_out4, N / 4);
    vec2<<<N / 2 / BLOCK, BLOCK>>>(d_in, d_out2, N / 2);
    cudaDeviceSynchronize();
    cudaFree(d_in);
    cudaFree(d_out4);
    cudaFree(d_out2);
    return 0;
}
