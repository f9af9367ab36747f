#include <cuda_bf16.h>
extern "C" __global__ void add_bf16(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = __hadd(a[i], b[i]);
}
// A runtime-indexed local array: lives in local memory (stack frame, LDL/STL in SASS).
extern "C" __global__ void local_array(const float* in, float* out, int k) {
    __shared__ float tile[256];
    float buf[32];
#pragma unroll 1
    for (int i = 0; i < 32; ++i) buf[i] = in[threadIdx.x * 32 + i];
    tile[threadIdx.x] = buf[k & 31];
    __syncthreads();
    out[threadIdx.x] = tile[(threadIdx.x + 1) & 255] + buf[(k + 1) & 31];
}
