// async_cases.cu -- which host accesses after a sync are observations (observe.py). Two
// independent launches with a cudaDeviceSynchronize() between them; an asynchronous
// host-to-device copy from pinned memory `h_in` and an asynchronous device-to-host copy into
// pinned memory `h_out` were issued before the first launch. -DCASE=n picks what the host does
// between the sync (line 35) and the second launch:
//   1: writes h_in[0] (memory an asynchronous copy reads): observed
//   2: sums h_out in a loop the host model skips: observed
//   3: reads timers only (clock, gettimeofday, cudaEventElapsedTime) and reads h_in: idle
//   4: writes a host array no copy uses: idle
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <sys/time.h>
#include <cuda_runtime.h>

#define N 1024

__global__ void scale(const float* x, float* y, float a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = a * x[i];
}

int main() {
    float *h_in, *h_out, *dx, *dy, *dz, *dw;
    float* other = (float*)malloc(N * sizeof(float));
    cudaMallocHost(&h_in, N * sizeof(float));
    cudaMallocHost(&h_out, N * sizeof(float));
    cudaMalloc(&dx, N * sizeof(float));
    cudaMalloc(&dy, N * sizeof(float));
    cudaMalloc(&dz, N * sizeof(float));
    cudaMalloc(&dw, N * sizeof(float));
    cudaMemcpyAsync(dx, h_in, N * sizeof(float), cudaMemcpyHostToDevice, 0);
    cudaMemcpyAsync(h_out, dw, N * sizeof(float), cudaMemcpyDeviceToHost, 0);
    scale<<<N / 256, 256>>>(dx, dy, 2.0f);
    cudaDeviceSynchronize();
#if CASE == 1
    h_in[0] = 1.0f;
#elif CASE == 2
    float sum = 0.0f;
    for (int i = 0; i < N; ++i) sum += h_out[i];
    printf("%f\n", sum);
#elif CASE == 3
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, e0, e1);
    struct timeval tv;
    gettimeofday(&tv, NULL);
    printf("%f ms, %ld s, %ld ticks, %f\n", ms, (long)tv.tv_sec, (long)clock(), h_in[3]);
#elif CASE == 4
    for (int i = 0; i < N; ++i) other[i] = (float)i;
#endif
    scale<<<N / 256, 256>>>(dx, dz, 3.0f);
    cudaDeviceSynchronize();
    cudaMemcpy(h_out, dy, N * sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(h_out, dz, N * sizeof(float), cudaMemcpyDeviceToHost);
    printf("%f\n", other[5]);
    return 0;
}
