// Written for sirius's tests by an independent check of the tool on programs it had not seen
// (2026-11-28; tests/unseen/test_unseen.py). Not from any benchmark suite.
// Two-layer network: forward (block reduction per hidden unit), errors, weight updates; a few epochs.
#include <cstdio>
#include <cuda_runtime.h>

#define NIN 512
#define NHID 32
#define NOUT 4
#define RT 128
#define EPOCHS 3

__global__ void hidden_forward(const float* x, const float* w1, float* h)
{
    __shared__ float part[RT];
    int j = blockIdx.x;
    float acc = 0.0f;
    for (int i = threadIdx.x; i < NIN; i += RT)
        acc += x[i] * w1[i * NHID + j];
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int s = RT / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) h[j] = 1.0f / (1.0f + expf(-part[0]));
}

__global__ void output_forward(const float* h, const float* w2, float* o)
{
    int k = threadIdx.x;
    if (k >= NOUT) return;
    float acc = 0.0f;
    for (int j = 0; j < NHID; ++j) acc += h[j] * w2[j * NOUT + k];
    o[k] = 1.0f / (1.0f + expf(-acc));
}

__global__ void output_delta(const float* o, const float* target, float* dout)
{
    int k = threadIdx.x;
    if (k < NOUT) dout[k] = o[k] * (1.0f - o[k]) * (target[k] - o[k]);
}

__global__ void hidden_delta(const float* h, const float* w2, const float* dout, float* dh)
{
    int j = threadIdx.x;
    if (j >= NHID) return;
    float acc = 0.0f;
    for (int k = 0; k < NOUT; ++k) acc += dout[k] * w2[j * NOUT + k];
    dh[j] = h[j] * (1.0f - h[j]) * acc;
}

__global__ void update_w1(float* w1, float* dw1, const float* x, const float* dh, float eta, float mom)
{
    int j = threadIdx.x;
    int i = blockIdx.x * blockDim.y + threadIdx.y;
    if (i >= NIN || j >= NHID) return;
    int idx = i * NHID + j;
    float d = eta * dh[j] * x[i] + mom * dw1[idx];
    w1[idx] += d;
    dw1[idx] = d;
}

__global__ void update_w2(float* w2, float* dw2, const float* h, const float* dout, float eta, float mom)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= NHID * NOUT) return;
    int j = t / NOUT, k = t % NOUT;
    float d = eta * dout[k] * h[j] + mom * dw2[t];
    w2[t] += d;
    dw2[t] = d;
}

int main()
{
    float hx[NIN], ht[NOUT];
    static float hw1[NIN * NHID], hw2[NHID * NOUT];
    for (int i = 0; i < NIN; ++i) hx[i] = (float)((i * 31) % 97) / 97.0f;
    for (int k = 0; k < NOUT; ++k) ht[k] = 0.2f + 0.2f * k;
    for (int i = 0; i < NIN * NHID; ++i) hw1[i] = ((float)((i * 17) % 41) - 20.0f) * 0.002f;
    for (int i = 0; i < NHID * NOUT; ++i) hw2[i] = ((float)((i * 5) % 23) - 11.0f) * 0.03f;

    float *x, *t, *w1, *w2, *dw1, *dw2, *h, *o, *dout, *dh;
    cudaMalloc(&x, NIN * 4); cudaMalloc(&t, NOUT * 4);
    cudaMalloc(&w1, NIN * NHID * 4); cudaMalloc(&w2, NHID * NOUT * 4);
    cudaMalloc(&dw1, NIN * NHID * 4); cudaMalloc(&dw2, NHID * NOUT * 4);
    cudaMalloc(&h, NHID * 4); cudaMalloc(&o, NOUT * 4);
    cudaMalloc(&dout, NOUT * 4); cudaMalloc(&dh, NHID * 4);
    cudaMemcpy(x, hx, NIN * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(t, ht, NOUT * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(w1, hw1, NIN * NHID * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(w2, hw2, NHID * NOUT * 4, cudaMemcpyHostToDevice);
    cudaMemset(dw1, 0, NIN * NHID * 4);
    cudaMemset(dw2, 0, NHID * NOUT * 4);

    for (int e = 0; e < EPOCHS; ++e) {
        hidden_forward<<<NHID, RT>>>(x, w1, h);
        output_forward<<<1, 32>>>(h, w2, o);
        output_delta<<<1, 32>>>(o, t, dout);
        hidden_delta<<<1, NHID>>>(h, w2, dout, dh);
        update_w1<<<NIN / 8, dim3(NHID, 8)>>>(w1, dw1, x, dh, 0.3f, 0.3f);
        update_w2<<<1, NHID * NOUT>>>(w2, dw2, h, dout, 0.3f, 0.3f);
    }
    hidden_forward<<<NHID, RT>>>(x, w1, h);
    output_forward<<<1, 32>>>(h, w2, o);

    float ho[NOUT];
    cudaMemcpy(ho, o, NOUT * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(hw1, w1, NIN * NHID * 4, cudaMemcpyDeviceToHost);
    double s = 0;
    for (int i = 0; i < NIN * NHID; ++i) s += hw1[i] * ((i % 13) + 1);
    printf("backprop out %f %f %f %f w1sum %.6f\n", ho[0], ho[1], ho[2], ho[3], s);
    cudaFree(x); cudaFree(t); cudaFree(w1); cudaFree(w2); cudaFree(dw1); cudaFree(dw2);
    cudaFree(h); cudaFree(o); cudaFree(dout); cudaFree(dh);
    return 0;
}
