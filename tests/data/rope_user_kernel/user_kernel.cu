// A user's RoPE kernel against the launcher kwiki wrote for this task (kernel_abi.h, generic order):
// tensors[0] = x [T, H, D] bf16, tensors[1] = positions [T] int64, tensors[2] = inv_freq [D/2] fp32
// (a buffer of the reference), tensors[3] = out [T, H, D] bf16; dims = every tensor's sizes in that order.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

__global__ void rope(const __nv_bfloat16* x, const long long* pos, const float* inv_freq, __nv_bfloat16* out, int t, int h, int d) {
  const int row = blockIdx.x;  // one (token, head) per block
  const int token = row / h;
  const int half = d / 2;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    const int j = i % half;
    const float angle = static_cast<float>(pos[token]) * inv_freq[j];
    const float c = cosf(angle), s = sinf(angle);
    const float v = __bfloat162float(x[row * d + i]);
    const float partner = __bfloat162float(x[row * d + (i < half ? i + half : i - half)]);
    const float rotated = i < half ? -partner : partner;
    out[row * d + i] = __float2bfloat16(v * c + rotated * s);
  }
}

extern "C" int kwiki_abi_version(void) { return 1; }

extern "C" int kwiki_launch(void* const* tensors, int num_tensors, const long long* dims, int num_dims, const double*, int, void* stream) {
  if (num_tensors != 4 || num_dims < 3) return -1;
  const int t = static_cast<int>(dims[0]), h = static_cast<int>(dims[1]), d = static_cast<int>(dims[2]);
  rope<<<t * h, 128, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<const __nv_bfloat16*>(tensors[0]), static_cast<const long long*>(tensors[1]),
                                                            static_cast<const float*>(tensors[2]), static_cast<__nv_bfloat16*>(tensors[3]), t, h, d);
  return static_cast<int>(cudaGetLastError());
}
