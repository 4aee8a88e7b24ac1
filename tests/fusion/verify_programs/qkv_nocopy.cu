// qkv_nocopy.cu -- BERT QKV's shape of storage reuse, with nothing copied back (issue 16 item
// 6). Three (project, transpose) pairs share the temp d_storage, as TVM's memory planner
// lays them out: proj writes d_storage, tr reads it into d_out_q / d_out_k / d_out_v. The
// third proj writes only the upper half (d_storage + N). Storage splitting gives the second
// and third pairs versions of their own (d_storage.v1: all 2N floats; d_storage.v2: bytes
// [4N, 8N) of d_storage), so the fused program's d_storage keeps the first pair's values.
// The original's d_storage ends holding the second proj's values in its lower half and the
// third's in its upper half: what verify must compare the versions against.
#include <cuda_runtime.h>

const int N = 1024;

__global__ void proj(float* t, const float* x, float a, float b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) t[i] = a * x[i] + b;
}

__global__ void tr(float* out, const float* t, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.x * blockDim.x + (blockDim.x - 1 - threadIdx.x);  // within the block
    if (i < n) out[i] = t[j] * 0.5f;
}

int main() {
    float* h_x = new float[2 * N];
    for (int i = 0; i < 2 * N; ++i) h_x[i] = (float)(i % 17) - 8.0f;
    float *d_x, *d_storage, *d_out_q, *d_out_k, *d_out_v;
    cudaMalloc(&d_x, 2 * N * sizeof(float));
    cudaMalloc(&d_storage, 2 * N * sizeof(float));
    cudaMalloc(&d_out_q, 2 * N * sizeof(float));
    cudaMalloc(&d_out_k, 2 * N * sizeof(float));
    cudaMalloc(&d_out_v, N * sizeof(float));
    cudaMemcpy(d_x, h_x, 2 * N * sizeof(float), cudaMemcpyHostToDevice);
    proj<<<2 * N / 256, 256>>>(d_storage, d_x, 2.0f, 1.0f, 2 * N);
    tr<<<2 * N / 256, 256>>>(d_out_q, d_storage, 2 * N);
    proj<<<2 * N / 256, 256>>>(d_storage, d_x, 3.0f, -1.0f, 2 * N);
    tr<<<2 * N / 256, 256>>>(d_out_k, d_storage, 2 * N);
    proj<<<N / 256, 256>>>(d_storage + N, d_x, -1.5f, 0.25f, N);
    tr<<<N / 256, 256>>>(d_out_v, d_storage + N, N);
    cudaDeviceSynchronize();
    delete[] h_x;
    return 0;
}
