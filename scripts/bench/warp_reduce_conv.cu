// warp_reduce_conv.cu -- the CPU executor on TVM's cross-thread reductions (warp shuffles and
// barriers): 25088 blocks of 256 threads, 13 stops per thread (2 __activemask, 8 __shfl_down_sync,
// 3 __syncthreads). The kernel is copied verbatim from kernels/tvm/paper/resnext50.cu (TVM
// 0.27.0.post1, `python scripts/gen_models.py paper resnext50`: one of its grouped convolutions,
// which with the five like it take 99% of that model's executor run); main() is hand-written
// (1/16 of the model's grid).
#include <cuda_runtime.h>
#include <stdio.h>
extern "C" __global__ void __launch_bounds__(256) fused_conv2d2_multiply1_add1_relu1_kernel(float* __restrict__ blocks_0_grouped_bn_scale_ptr, float* __restrict__ blocks_0_grouped_bn_shift_ptr, float* __restrict__ blocks_0_grouped_conv_weight_ptr, float* __restrict__ compute_intermediate_ptr, float* __restrict__ relu1_ptr) {
  alignas(64) float in_thread_group_conv2d_nchw_intermediate_shared_ptr[1];
  __shared__ alignas(64) float red_result_ptr[1];
  __shared__ alignas(64) float group_conv2d_nchw_intermediate_shared_ptr[1];
  in_thread_group_conv2d_nchw_intermediate_shared_ptr[0] = 0x0p+0f/*0.000000e+00*/;
  int cse_v3 = (((int)blockIdx.x) / 3136);
  if (((int)threadIdx.x) < 36) {
    int cse_v1 = (((int)blockIdx.x) % 3136);
    int cse_v2 = (((int)threadIdx.x) % 3);
    int cse_v4 = ((((int)threadIdx.x) % 9) / 3);
    int cse_v5 = ((((int)blockIdx.x) % 56) + (((int)threadIdx.x) % 3));
    int cse_v6 = (((((int)blockIdx.x) % 3136) / 56) + ((((int)threadIdx.x) % 9) / 3));
    float condval;
    if ((((1 <= (((((int)blockIdx.x) % 3136) / 56) + ((((int)threadIdx.x) % 9) / 3))) && ((((((int)blockIdx.x) % 3136) / 56) + ((((int)threadIdx.x) % 9) / 3)) < 57)) && (1 <= ((((int)blockIdx.x) % 56) + (((int)threadIdx.x) % 3)))) && (((((int)blockIdx.x) % 56) + (((int)threadIdx.x) % 3)) < 57)) {
      condval = relu1_ptr[(((((((((int)blockIdx.x) / 12544) * 12544) + ((((int)threadIdx.x) / 9) * 3136)) + (((((int)threadIdx.x) % 9) / 3) * 56)) + (((int)blockIdx.x) % 3136)) + (((int)threadIdx.x) % 3)) - 57)];
    } else {
      condval = 0x0p+0f/*0.000000e+00*/;
    }
    in_thread_group_conv2d_nchw_intermediate_shared_ptr[0] = (in_thread_group_conv2d_nchw_intermediate_shared_ptr[0] + (condval * blocks_0_grouped_conv_weight_ptr[(((((int)blockIdx.x) / 3136) * 36) + ((int)threadIdx.x))]));
  }
  __shared__ alignas(64) float red_buf_staging_ptr[8];
  alignas(64) float t0_ptr[1];
  alignas(64) uint mask_ptr[1];
  alignas(64) float red_buf0_ptr[1];
  alignas(64) float t0_ptr_1[1];
  alignas(64) uint mask_ptr_1[1];
  alignas(64) float red_buf0_ptr_1[1];
  red_buf0_ptr[0] = in_thread_group_conv2d_nchw_intermediate_shared_ptr[0];
  mask_ptr[0] = __activemask();
  t0_ptr[0] = __shfl_down_sync(mask_ptr[0], red_buf0_ptr[0], 16, 32);
  red_buf0_ptr[0] = (red_buf0_ptr[0] + t0_ptr[0]);
  t0_ptr[0] = __shfl_down_sync(mask_ptr[0], red_buf0_ptr[0], 8, 32);
  red_buf0_ptr[0] = (red_buf0_ptr[0] + t0_ptr[0]);
  t0_ptr[0] = __shfl_down_sync(mask_ptr[0], red_buf0_ptr[0], 4, 32);
  red_buf0_ptr[0] = (red_buf0_ptr[0] + t0_ptr[0]);
  t0_ptr[0] = __shfl_down_sync(mask_ptr[0], red_buf0_ptr[0], 2, 32);
  red_buf0_ptr[0] = (red_buf0_ptr[0] + t0_ptr[0]);
  t0_ptr[0] = __shfl_down_sync(mask_ptr[0], red_buf0_ptr[0], 1, 32);
  red_buf0_ptr[0] = (red_buf0_ptr[0] + t0_ptr[0]);
  if ((((int)threadIdx.x) % 32) == 0) {
    red_buf_staging_ptr[(((int)threadIdx.x) >> 5)] = red_buf0_ptr[0];
  }
  __syncthreads();
  if (((int)threadIdx.x) < 8) {
    red_buf0_ptr_1[0] = red_buf_staging_ptr[((int)threadIdx.x)];
  }
  mask_ptr_1[0] = __activemask();
  t0_ptr_1[0] = __shfl_down_sync(mask_ptr_1[0], red_buf0_ptr_1[0], 4, 32);
  red_buf0_ptr_1[0] = (red_buf0_ptr_1[0] + t0_ptr_1[0]);
  t0_ptr_1[0] = __shfl_down_sync(mask_ptr_1[0], red_buf0_ptr_1[0], 2, 32);
  red_buf0_ptr_1[0] = (red_buf0_ptr_1[0] + t0_ptr_1[0]);
  t0_ptr_1[0] = __shfl_down_sync(mask_ptr_1[0], red_buf0_ptr_1[0], 1, 32);
  red_buf0_ptr_1[0] = (red_buf0_ptr_1[0] + t0_ptr_1[0]);
  if (((int)threadIdx.x) == 0) {
    ((volatile float*)red_result_ptr)[0] = red_buf0_ptr_1[0];
  }
  __syncthreads();
  if (((int)threadIdx.x) == 0) {
    group_conv2d_nchw_intermediate_shared_ptr[0] = ((volatile float*)red_result_ptr)[0];
  }
  __syncthreads();
  if (((int)threadIdx.x) < 1) {
    compute_intermediate_ptr[((int)blockIdx.x)] = max(((group_conv2d_nchw_intermediate_shared_ptr[0] * blocks_0_grouped_bn_scale_ptr[(((int)blockIdx.x) / 3136)]) + blocks_0_grouped_bn_shift_ptr[(((int)blockIdx.x) / 3136)]), 0x0p+0f/*0.000000e+00*/);
  }
}
int main() {
  float *scale, *shift, *w, *out, *in;
  cudaMalloc((void**)&scale, 128*4); cudaMalloc((void**)&shift, 128*4);
  cudaMalloc((void**)&w, 128*36*4); cudaMalloc((void**)&out, 401408*4); cudaMalloc((void**)&in, 401408*4);
  fused_conv2d2_multiply1_add1_relu1_kernel<<<dim3(25088, 1, 1), dim3(256, 1, 1), 0>>>(scale, shift, w, out, in);
  float *h = (float*)malloc(401408*4);
  cudaMemcpy(h, out, 401408*4, cudaMemcpyDeviceToHost);
  return 0;
}
