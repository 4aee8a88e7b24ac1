// Bad input: a texture object. clang compiles it (tex1Dfetch<float> becomes inline PTX
// `tex.1d...` in the kernel), but sirius does not model textures: host analysis must reject the
// cudaCreateTextureObject on the line marked OFFENDING.
#include <cuda_runtime.h>

__global__ void gather(cudaTextureObject_t t, float *out) {
    out[threadIdx.x] = tex1Dfetch<float>(t, threadIdx.x);
}

int main() {
    float *d_in, *d_out;
    cudaMalloc(&d_in, 32 * sizeof(float));
    cudaMalloc(&d_out, 32 * sizeof(float));
    cudaResourceDesc res = {};
    res.resType = cudaResourceTypeLinear;
    res.res.linear.devPtr = d_in;
    res.res.linear.desc = cudaCreateChannelDesc<float>();
    res.res.linear.sizeInBytes = 32 * sizeof(float);
    cudaTextureDesc desc = {};
    desc.readMode = cudaReadModeElementType;
    cudaTextureObject_t t = 0;
    cudaCreateTextureObject(&t, &res, &desc, nullptr);  // OFFENDING
    gather<<<1, 32>>>(t, d_out);
    cudaDeviceSynchronize();
    cudaDestroyTextureObject(t);
    cudaFree(d_in);
    cudaFree(d_out);
    return 0;
}
