// atomics.cu -- atomic add, min, max, exch and CAS on int, unsigned and float, global and shared.
//
// atomics_global (grid 32 x 128 threads, n = 4096, no barrier: the executor's fast path, blocks
// spread over the cores): every thread i folds vi[i], vu[i], vf[i] into one global slot per
// operation:
//   gi[0] += vi   gi[1] = min   gi[2] = max   gi[3] exch (old value -> old_i[i])
//   gi[4] += vi by an atomicCAS loop
//   gu[0] += vu   gu[1] = min   gu[2] = max   gu[3] exch (old -> old_u[i])
//   gu[4] += 1 (the returned ticket -> ticket[i])
//   gf[0] += vf   gf[1] exch (old -> old_f[i])   gf[2] = max by an atomicCAS loop on the bits
// atomics_shared (grid 8 x 128, one barrier before and after): the same operations on
// __shared__ slots initialised by thread 0 to the same start values the host gives the global
// slots; thread k < 5 then writes slot k to bi/bu/bf[block * 5 + k]; the block-local ticket goes
// to sticket[i].
#include <cuda_runtime.h>

#define N 4096
#define BLOCK 128
#define GRID_SHARED 8
#define NS (GRID_SHARED * BLOCK)
#define SLOTS 5

__device__ void cas_add(int* p, int v)
{
    int old = *p, assumed;
    do {
        assumed = old;
        old = atomicCAS(p, assumed, assumed + v);
    } while (old != assumed);
}

__device__ void cas_fmax(float* p, float v)
{
    int* q = (int*)p;
    int old = *q, assumed;
    do {
        assumed = old;
        if (__int_as_float(assumed) >= v)
            break;
        old = atomicCAS(q, assumed, __float_as_int(v));
    } while (old != assumed);
}

__global__ void atomics_global(const int* vi, const unsigned* vu, const float* vf, int* gi,
                               unsigned* gu, float* gf, int* old_i, unsigned* old_u,
                               float* old_f, unsigned* ticket, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    atomicAdd(&gi[0], vi[i]);
    atomicMin(&gi[1], vi[i]);
    atomicMax(&gi[2], vi[i]);
    old_i[i] = atomicExch(&gi[3], vi[i]);
    cas_add(&gi[4], vi[i]);
    atomicAdd(&gu[0], vu[i]);
    atomicMin(&gu[1], vu[i]);
    atomicMax(&gu[2], vu[i]);
    old_u[i] = atomicExch(&gu[3], vu[i]);
    ticket[i] = atomicAdd(&gu[4], 1u);
    atomicAdd(&gf[0], vf[i]);
    old_f[i] = atomicExch(&gf[1], vf[i]);
    cas_fmax(&gf[2], vf[i]);
}

__global__ void atomics_shared(const int* vi, const unsigned* vu, const float* vf, int* bi,
                               unsigned* bu, float* bf, unsigned* sticket, int n)
{
    __shared__ int si[SLOTS];
    __shared__ unsigned su[SLOTS];
    __shared__ float sf[SLOTS];
    int t = threadIdx.x;
    int i = blockIdx.x * blockDim.x + t;
    if (t == 0) {
        si[0] = 0; si[1] = 0x7fffffff; si[2] = -0x7fffffff - 1; si[3] = -1; si[4] = 0;
        su[0] = 0; su[1] = 0xffffffffu; su[2] = 0; su[3] = 0xffffffffu; su[4] = 0;
        sf[0] = 0.0f; sf[1] = -1.0f; sf[2] = -1.0e30f; sf[3] = 0.0f; sf[4] = 0.0f;
    }
    __syncthreads();
    if (i < n) {
        atomicAdd(&si[0], vi[i]);
        atomicMin(&si[1], vi[i]);
        atomicMax(&si[2], vi[i]);
        atomicExch(&si[3], vi[i]);
        cas_add(&si[4], vi[i]);
        atomicAdd(&su[0], vu[i]);
        atomicMin(&su[1], vu[i]);
        atomicMax(&su[2], vu[i]);
        atomicExch(&su[3], vu[i]);
        sticket[i] = atomicAdd(&su[4], 1u);
        atomicAdd(&sf[0], vf[i]);
        atomicExch(&sf[1], vf[i]);
        cas_fmax(&sf[2], vf[i]);
    }
    __syncthreads();
    if (t < SLOTS) {
        bi[blockIdx.x * SLOTS + t] = si[t];
        bu[blockIdx.x * SLOTS + t] = su[t];
        bf[blockIdx.x * SLOTS + t] = sf[t];
    }
}

int main()
{
    int *d_vi, *d_gi, *d_old_i, *d_bi;
    unsigned *d_vu, *d_gu, *d_old_u, *d_ticket, *d_bu, *d_sticket;
    float *d_vf, *d_gf, *d_old_f, *d_bf;
    int* h_vi = new int[N];
    unsigned* h_vu = new unsigned[N];
    float* h_vf = new float[N];
    int h_gi[SLOTS] = {0, 0x7fffffff, -0x7fffffff - 1, -1, 0};
    unsigned h_gu[SLOTS] = {0, 0xffffffffu, 0, 0xffffffffu, 0};
    float h_gf[SLOTS] = {0.0f, -1.0f, -1.0e30f, 0.0f, 0.0f};
    for (int i = 0; i < N; ++i) {
        h_vi[i] = (i * 7919) % 2001 - 1000;
        h_vu[i] = (unsigned)i * 2654435761u;
        h_vf[i] = 0.25f * (float)((i * 13) % 257 - 128);
    }
    cudaMalloc(&d_vi, N * sizeof(int));
    cudaMalloc(&d_vu, N * sizeof(unsigned));
    cudaMalloc(&d_vf, N * sizeof(float));
    cudaMalloc(&d_gi, SLOTS * sizeof(int));
    cudaMalloc(&d_gu, SLOTS * sizeof(unsigned));
    cudaMalloc(&d_gf, SLOTS * sizeof(float));
    cudaMalloc(&d_old_i, N * sizeof(int));
    cudaMalloc(&d_old_u, N * sizeof(unsigned));
    cudaMalloc(&d_old_f, N * sizeof(float));
    cudaMalloc(&d_ticket, N * sizeof(unsigned));
    cudaMalloc(&d_bi, GRID_SHARED * SLOTS * sizeof(int));
    cudaMalloc(&d_bu, GRID_SHARED * SLOTS * sizeof(unsigned));
    cudaMalloc(&d_bf, GRID_SHARED * SLOTS * sizeof(float));
    cudaMalloc(&d_sticket, NS * sizeof(unsigned));
    cudaMemcpy(d_vi, h_vi, N * sizeof(int), cudaMemcpyHostToDevice);
    cudaMemcpy(d_vu, h_vu, N * sizeof(unsigned), cudaMemcpyHostToDevice);
    cudaMemcpy(d_vf, h_vf, N * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(d_gi, h_gi, SLOTS * sizeof(int), cudaMemcpyHostToDevice);
    cudaMemcpy(d_gu, h_gu, SLOTS * sizeof(unsigned), cudaMemcpyHostToDevice);
    cudaMemcpy(d_gf, h_gf, SLOTS * sizeof(float), cudaMemcpyHostToDevice);
    atomics_global<<<N / BLOCK, BLOCK>>>(d_vi, d_vu, d_vf, d_gi, d_gu, d_gf, d_old_i, d_old_u,
                                         d_old_f, d_ticket, N);
    atomics_shared<<<GRID_SHARED, BLOCK>>>(d_vi, d_vu, d_vf, d_bi, d_bu, d_bf, d_sticket, NS);
    cudaDeviceSynchronize();
    cudaFree(d_vi);
    cudaFree(d_vu);
    cudaFree(d_vf);
    cudaFree(d_gi);
    cudaFree(d_gu);
    cudaFree(d_gf);
    cudaFree(d_old_i);
    cudaFree(d_old_u);
    cudaFree(d_old_f);
    cudaFree(d_ticket);
    cudaFree(d_bi);
    cudaFree(d_bu);
    cudaFree(d_bf);
    cudaFree(d_sticket);
    delete[] h_vi;
    delete[] h_vu;
    delete[] h_vf;
    return 0;
}
