// silu_and_mul.cuh: kwiki V0 template, the SiLU (SwiGLU) gate of a gated MLP.
//
//   out[t, i] = silu(x[t, i]) * x[t, I + i],   silu(g) = g / (1 + exp(-g))
//
// x is [T, 2I], the gate half first and the up half second; out is [T, I].
// ABI (ABI.md): tensors x[T,2I], out[T,I]; dims T, I; no params.
// The activation and the product in fp32, one rounding at the store.
//
// Design (memory-bound, elementwise): a grid-stride loop over the T x I outputs in
// 16-byte vectors (8 bf16/fp16 or 4 fp32 per step): two 16-byte loads (gate, up) and one
// 16-byte store per step; 256 threads per block, min(ceil(T*I / (256 * vec)), 8 x SMs)
// blocks. The vector path needs I a multiple of the vector width (so both halves of every
// row start 16-byte aligned) and aligned pointers; else the same loop runs one element a
// step. 32-bit index arithmetic when every index fits, else 64-bit.
#ifndef KWIKI_SILU_AND_MUL_CUH
#define KWIKI_SILU_AND_MUL_CUH

#include "kwiki_compat.cuh"

namespace kwiki_silu_and_mul {

/// silu(g) = g / (1 + exp(-g)), in fp32.
struct Activation {
  KWIKI_DEVICE static float apply(float g) {
    return g / (1.f + expf(-g));
  }
};

/// Launches silu_and_mul on `stream`; 0, the launch error, or -1 for sizes it cannot serve.
template <typename T>
inline int launch(const T* x, T* out, long long rows, long long I, kwiki_stream_t stream) {
  return kwiki::launch_gated_mul<Activation>(x, out, rows, I, stream);
}

}  // namespace kwiki_silu_and_mul

#ifdef KWIKI_DEFINE_LAUNCHER
#ifndef KWIKI_T
#error "define KWIKI_T (the element type) before including silu_and_mul.cuh"
#endif
KWIKI_EXPORT int kwiki_abi_version(void) { return 1; }

KWIKI_EXPORT int kwiki_launch(void* const* tensors, int num_tensors, const long long* dims, int num_dims, const double* params,
                              int num_params, void* stream) {
  (void)params;
  (void)num_params;
  if (tensors == nullptr || dims == nullptr || num_tensors != 2 || num_dims != 2) return -1;
  if (tensors[0] == nullptr || tensors[1] == nullptr) return -1;
  return kwiki_silu_and_mul::launch<KWIKI_T>(static_cast<const KWIKI_T*>(tensors[0]), static_cast<KWIKI_T*>(tensors[1]), dims[0], dims[1],
                                        static_cast<kwiki_stream_t>(stream));
}
#endif  // KWIKI_DEFINE_LAUNCHER

#endif  // KWIKI_SILU_AND_MUL_CUH
