// unsafe.cu -- temp buffers that split_storage must leave alone, one scenario each (N = 1024
// floats; every temp is 2N floats = 8192 bytes). In the first four a launch rewrites the temp,
// and moving the launches from there on to a fresh buffer would change an output:
//
//   d_p  partial overwrite: fill writes [0, 8192), pairsum reads it (d_o1); fill rewrites only
//        [0, 4096); pairsum reads [0, 8192) again (d_o2): its upper half is the old value.
//   d_h  the old value read after the rewrite: fill writes [0, 8192); fill rewrites the upper
//        half at d_h + N; copy_out reads the lower half (d_o3, the old value), copy_out the
//        upper (d_o4).
//   d_r  read-modify-write: fill, copy_out (d_o5), twice (t[i] *= 2: reads the old value),
//        copy_out (d_o6).
//   d_g  a data-dependent write: fill, copy_out (d_o7), fill_positive (writes t[i] only where
//        x[i] > 0: an inexact write), copy_out (d_o8: the old value where x[i] <= 0).
//
// and two whose uses are not all launches outside host loops:
//
//   d_m  cleared by cudaMemset, then read by copy_out (d_o9).
//   d_l  written and read inside a host loop of 2 iterations (fill, copy_out into d_o10).
//
// Expected host model: buffers d_x (input), d_p, d_h, d_r, d_g, d_m, d_l (temps), d_o1..d_o10
// (outputs); statements S0 copy H2D d_x; S1-S4 d_p's fill, pairsum, fill, pairsum; S5-S8 d_h's
// fill, fill (d_h + 4096), copy_out, copy_out (d_h + 4096); S9-S12 d_r's fill, copy_out, twice,
// copy_out; S13-S16 d_g's fill, copy_out, fill_positive, copy_out; S17 memset d_m; S18
// copy_out; S19, S20 fill and copy_out in a loop k = 0..1; S21 sync; S22-S31 copies D2H.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

const int N = 1024;

__global__ void fill(float* t, const float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) t[i] = a * x[i];
}

__global__ void fill_positive(float* t, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && x[i] > 0.0f) t[i] = x[i];
}

__global__ void twice(float* t, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) t[i] = 2.0f * t[i];
}

__global__ void pairsum(float* out, const float* t, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = t[i] + t[i + n];
}

__global__ void copy_out(float* out, const float* t, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = t[i] + 1.0f;
}

int main() {
    const size_t big = 2 * N * sizeof(float), small = N * sizeof(float);
    float* h_x = (float*)malloc(big);
    float* h_o = (float*)malloc(10 * small);
    for (int i = 0; i < 2 * N; ++i) h_x[i] = (float)(i % 13) - 6.0f;
    float *d_x, *d_p, *d_h, *d_r, *d_g, *d_m, *d_l;
    float *d_o1, *d_o2, *d_o3, *d_o4, *d_o5, *d_o6, *d_o7, *d_o8, *d_o9, *d_o10;
    cudaMalloc(&d_x, big);
    cudaMalloc(&d_p, big);
    cudaMalloc(&d_h, big);
    cudaMalloc(&d_r, big);
    cudaMalloc(&d_g, big);
    cudaMalloc(&d_m, big);
    cudaMalloc(&d_l, big);
    cudaMalloc(&d_o1, small);
    cudaMalloc(&d_o2, small);
    cudaMalloc(&d_o3, small);
    cudaMalloc(&d_o4, small);
    cudaMalloc(&d_o5, small);
    cudaMalloc(&d_o6, small);
    cudaMalloc(&d_o7, small);
    cudaMalloc(&d_o8, small);
    cudaMalloc(&d_o9, small);
    cudaMalloc(&d_o10, small);
    cudaMemcpy(d_x, h_x, big, cudaMemcpyHostToDevice);
    // d_p: partial overwrite
    fill<<<2 * N / 256, 256>>>(d_p, d_x, 2.0f, 2 * N);
    pairsum<<<N / 256, 256>>>(d_o1, d_p, N);
    fill<<<N / 256, 256>>>(d_p, d_x, 3.0f, N);
    pairsum<<<N / 256, 256>>>(d_o2, d_p, N);
    // d_h: the old lower half read after the upper half is rewritten
    fill<<<2 * N / 256, 256>>>(d_h, d_x, 4.0f, 2 * N);
    fill<<<N / 256, 256>>>(d_h + N, d_x, 5.0f, N);
    copy_out<<<N / 256, 256>>>(d_o3, d_h, N);
    copy_out<<<N / 256, 256>>>(d_o4, d_h + N, N);
    // d_r: read-modify-write
    fill<<<N / 256, 256>>>(d_r, d_x, 6.0f, N);
    copy_out<<<N / 256, 256>>>(d_o5, d_r, N);
    twice<<<N / 256, 256>>>(d_r, N);
    copy_out<<<N / 256, 256>>>(d_o6, d_r, N);
    // d_g: a data-dependent write
    fill<<<N / 256, 256>>>(d_g, d_x, 7.0f, N);
    copy_out<<<N / 256, 256>>>(d_o7, d_g, N);
    fill_positive<<<N / 256, 256>>>(d_g, d_x, N);
    copy_out<<<N / 256, 256>>>(d_o8, d_g, N);
    // d_m: a memset
    cudaMemset(d_m, 0, big);
    copy_out<<<N / 256, 256>>>(d_o9, d_m, N);
    // d_l: a host loop
    for (int k = 0; k < 2; ++k) {
        fill<<<N / 256, 256>>>(d_l, d_x, 8.0f, N);
        copy_out<<<N / 256, 256>>>(d_o10, d_l, N);
    }
    cudaDeviceSynchronize();
    cudaMemcpy(h_o + 0 * N, d_o1, small, cudaMemcpyDeviceToHost);
    cudaMemcpy(h_o + 1 * N, d_o2, small, cudaMemcpyDeviceToHost);
    cudaMemcpy(h_o + 2 * N, d_o3, small, cudaMemcpyDeviceToHost);
    cudaMemcpy(h_o + 3 * N, d_o4, small, cudaMemcpyDeviceToHost);
    cudaMemcpy(h_o + 4 * N, d_o5, small, cudaMemcpyDeviceToHost);
    cudaMemcpy(h_o + 5 * N, d_o6, small, cudaMemcpyDeviceToHost);
    cudaMemcpy(h_o + 6 * N, d_o7, small, cudaMemcpyDeviceToHost);
    cudaMemcpy(h_o + 7 * N, d_o8, small, cudaMemcpyDeviceToHost);
    cudaMemcpy(h_o + 8 * N, d_o9, small, cudaMemcpyDeviceToHost);
    cudaMemcpy(h_o + 9 * N, d_o10, small, cudaMemcpyDeviceToHost);
    printf("%f\n", h_o[0]);
    cudaFree(d_x);
    cudaFree(d_p);
    cudaFree(d_h);
    cudaFree(d_r);
    cudaFree(d_g);
    cudaFree(d_m);
    cudaFree(d_l);
    cudaFree(d_o1);
    cudaFree(d_o2);
    cudaFree(d_o3);
    cudaFree(d_o4);
    cudaFree(d_o5);
    cudaFree(d_o6);
    cudaFree(d_o7);
    cudaFree(d_o8);
    cudaFree(d_o9);
    cudaFree(d_o10);
    free(h_x);
    free(h_o);
    return 0;
}
