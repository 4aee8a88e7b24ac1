// Bad input: a legacy texture reference. CUDA 12 removed texture references (the `texture<>`
// template, cudaBindTexture), so clang rejects the declaration on the line marked OFFENDING
// ("no template named 'texture'"), and the later uses fail with it.
#include <cuda_runtime.h>

texture<float, 1, cudaReadModeElementType> tex;  // OFFENDING

__global__ void gather(float *out) { out[threadIdx.x] = tex1Dfetch(tex, threadIdx.x); }

int main() {
    float *d_in, *d_out;
    cudaMalloc(&d_in, 32 * sizeof(float));
    cudaMalloc(&d_out, 32 * sizeof(float));
    cudaBindTexture(0, tex, d_in, 32 * sizeof(float));
    gather<<<1, 32>>>(d_out);
    cudaDeviceSynchronize();
    cudaFree(d_in);
    cudaFree(d_out);
    return 0;
}
