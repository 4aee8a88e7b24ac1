// Bad input: a recursive host function that launches a kernel. clang compiles it; the number
// of launches depends on the recursion, which the host model (ops and counted loops) cannot
// represent, so host analysis must reject the recursive call on the line marked OFFENDING. The
// call is not a tail call (a launch follows it), so -O1 keeps it recursive.
#include <cuda_runtime.h>

__global__ void scale(float *x) { x[threadIdx.x] *= 2.0f; }

void run(float *x, int depth) {
    if (depth == 0) return;
    run(x, depth - 1);  // OFFENDING
    scale<<<1, 32>>>(x);
}

int main() {
    float *d_x;
    cudaMalloc(&d_x, 32 * sizeof(float));
    run(d_x, 4);
    cudaDeviceSynchronize();
    cudaFree(d_x);
    return 0;
}
