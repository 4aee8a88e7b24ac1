// grid3d.cu -- 3-D grids and blocks: grid (2, 3, 4), block (4, 2, 3): 24 blocks x 24 threads.
//
// ids3d (no barrier, fast path): thread g = linear block * 24 + linear thread writes
//   out[4g + 0] = bx + 10 by + 100 bz     out[4g + 1] = tx + 10 ty + 100 tz
//   out[4g + 2] = gridDim  packed alike    out[4g + 3] = blockDim packed alike
// where linear block = (bz * 3 + by) * 2 + bx and linear thread = (tz * 2 + ty) * 4 + tx.
// mirror3d (one barrier, fibers): s[tz][ty][tx] = g; after the barrier thread (tx, ty, tz)
// writes mirror[g] = s[2 - tz][1 - ty][3 - tx], i.e. the g of the mirrored thread of its block.
#include <cuda_runtime.h>

#define GX 2
#define GY 3
#define GZ 4
#define BX 4
#define BY 2
#define BZ 3
#define NT (GX * GY * GZ * BX * BY * BZ)

__global__ void ids3d(int* out)
{
    int lb = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    int lt = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    int g = lb * (blockDim.x * blockDim.y * blockDim.z) + lt;
    out[4 * g + 0] = blockIdx.x + 10 * blockIdx.y + 100 * blockIdx.z;
    out[4 * g + 1] = threadIdx.x + 10 * threadIdx.y + 100 * threadIdx.z;
    out[4 * g + 2] = gridDim.x + 10 * gridDim.y + 100 * gridDim.z;
    out[4 * g + 3] = blockDim.x + 10 * blockDim.y + 100 * blockDim.z;
}

__global__ void mirror3d(int* mirror)
{
    __shared__ int s[BZ][BY][BX];
    int lb = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    int lt = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    int g = lb * (blockDim.x * blockDim.y * blockDim.z) + lt;
    s[threadIdx.z][threadIdx.y][threadIdx.x] = g;
    __syncthreads();
    mirror[g] = s[BZ - 1 - threadIdx.z][BY - 1 - threadIdx.y][BX - 1 - threadIdx.x];
}

int main()
{
    int *d_ids, *d_mirror;
    cudaMalloc(&d_ids, 4 * NT * sizeof(int));
    cudaMalloc(&d_mirror, NT * sizeof(int));
    dim3 grid(GX, GY, GZ);
    dim3 block(BX, BY, BZ);
    ids3d<<<grid, block>>>(d_ids);
    mirror3d<<<grid, block>>>(d_mirror);
    cudaDeviceSynchronize();
    cudaFree(d_ids);
    cudaFree(d_mirror);
    return 0;
}
