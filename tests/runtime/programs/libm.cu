// libm.cu -- libdevice math (the __nv_* functions clang calls with -nocudalib) and a few
// fast-math intrinsics, elementwise over n = 256 values; out[k * n + i] is function k of
// (a, b, c) = (x[i], y[i], z[i]) with x, z in [-4, 4] and y in (0, 10]:
//   0 expf(a)      1 erff(a)       2 tanhf(a)       3 rsqrtf(b)      4 fmaxf(a, c)
//   5 fminf(a, c)  6 fmaf(a, b, c) 7 logf(b)        8 sinf(a)        9 cosf(a)
//  10 sqrtf(b)    11 powf(b, a)   12 atan2f(a, c)  13 log1pf(b)     14 expm1f(a)
//  15 floorf(3a)  16 fabsf(a)     17 exp2f(a)      18 log2f(b)      19 erfcf(a)
//  20 __expf(a)   21 __fdividef(a, b)              22 __saturatef(a)
//  23 sinhf(a)    24 coshf(a)     25 asinf(a / 4)  26 atanf(a)      27 cbrtf(c)
//  28 fmodf(a, b) 29 log10f(b)    30 truncf(3a)    31 roundf(3a)
// imath: ints a, b (any int32): out[k * n + i] for
//   0 max(a, b)   1 min(a, b)     2 abs(a)        3 __popc(a)      4 __clz(a)
//   5 __brev(a)   6 __mulhi(a, b) 7 __ffs(a)      8 umax(a, b)     9 umin(a, b) (as unsigned)
#include <cuda_runtime.h>

#define N 256
#define BLOCK 128
#define NF 32
#define NI 10

__global__ void fmath(const float* x, const float* y, const float* z, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float a = x[i], b = y[i], c = z[i];
    float* o = out + i;
    o[0 * n] = expf(a);
    o[1 * n] = erff(a);
    o[2 * n] = tanhf(a);
    o[3 * n] = rsqrtf(b);
    o[4 * n] = fmaxf(a, c);
    o[5 * n] = fminf(a, c);
    o[6 * n] = fmaf(a, b, c);
    o[7 * n] = logf(b);
    o[8 * n] = sinf(a);
    o[9 * n] = cosf(a);
    o[10 * n] = sqrtf(b);
    o[11 * n] = powf(b, a);
    o[12 * n] = atan2f(a, c);
    o[13 * n] = log1pf(b);
    o[14 * n] = expm1f(a);
    o[15 * n] = floorf(3.0f * a);
    o[16 * n] = fabsf(a);
    o[17 * n] = exp2f(a);
    o[18 * n] = log2f(b);
    o[19 * n] = erfcf(a);
    o[20 * n] = __expf(a);
    o[21 * n] = __fdividef(a, b);
    o[22 * n] = __saturatef(a);
    o[23 * n] = sinhf(a);
    o[24 * n] = coshf(a);
    o[25 * n] = asinf(a / 4.0f);
    o[26 * n] = atanf(a);
    o[27 * n] = cbrtf(c);
    o[28 * n] = fmodf(a, b);
    o[29 * n] = log10f(b);
    o[30 * n] = truncf(3.0f * a);
    o[31 * n] = roundf(3.0f * a);
}

__global__ void imath(const int* x, const int* y, int* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    int a = x[i], b = y[i];
    int* o = out + i;
    o[0 * n] = max(a, b);
    o[1 * n] = min(a, b);
    o[2 * n] = abs(a);
    o[3 * n] = __popc(a);
    o[4 * n] = __clz(a);
    o[5 * n] = (int)__brev((unsigned)a);
    o[6 * n] = __mulhi(a, b);
    o[7 * n] = __ffs(a);
    o[8 * n] = (int)umax((unsigned)a, (unsigned)b);
    o[9 * n] = (int)umin((unsigned)a, (unsigned)b);
}

int main()
{
    float *d_x, *d_y, *d_z, *d_out;
    int *d_a, *d_b, *d_iout;
    cudaMalloc(&d_x, N * sizeof(float));
    cudaMalloc(&d_y, N * sizeof(float));
    cudaMalloc(&d_z, N * sizeof(float));
    cudaMalloc(&d_out, NF * N * sizeof(float));
    cudaMalloc(&d_a, N * sizeof(int));
    cudaMalloc(&d_b, N * sizeof(int));
    cudaMalloc(&d_iout, NI * N * sizeof(int));
    fmath<<<N / BLOCK, BLOCK>>>(d_x, d_y, d_z, d_out, N);
    imath<<<N / BLOCK, BLOCK>>>(d_a, d_b, d_iout, N);
    cudaDeviceSynchronize();
    cudaFree(d_x);
    cudaFree(d_y);
    cudaFree(d_z);
    cudaFree(d_out);
    cudaFree(d_a);
    cudaFree(d_b);
    cudaFree(d_iout);
    return 0;
}
