// rms_norm.cuh: kwiki V0 template, RMSNorm over the last dimension.
//
//   out[t, :] = x[t, :] / sqrt(mean(x[t, :]^2) + eps) * weight
//
// ABI (ABI.md): tensors x[T,H], weight[H], out[T,H]; dims T, H; params eps.
// Statistics and scaling in fp32, one rounding at the store.
//
// Design (memory-bound): one row per block (one row per warp when the row is at most a warp
// of vectors), the row read once into registers with 16-byte loads and written once; the
// sum of squares reduced with warp butterflies then one value per warp through shared memory.
// A resident grid strides over the rows and loads the next row while reducing this one.
// Rows longer than 16384 elements (4096 on the scalar path) are re-read (from L2) by a
// looping kernel. The vector path needs 16-byte aligned pointers and H a multiple of the
// vector width; otherwise scalar (still coalesced) accesses.
#ifndef KWIKI_RMS_NORM_CUH
#define KWIKI_RMS_NORM_CUH

#include "kwiki_compat.cuh"

namespace kwiki_rms_norm {

/// Row kept in registers: VPT accesses of W elements per thread (H a multiple of W); the next
/// row's slice is loaded while this one is reduced and written.
template <typename T, int W, int VPT, bool kWarpRow>
KWIKI_GLOBAL void __launch_bounds__(kwiki::row_block_bound(W, VPT))
rms_norm_kernel(const T* __restrict__ x, const T* __restrict__ weight, T* __restrict__ out, long long rows, int H, float eps) {
  using G = kwiki::RowGroup<kWarpRow>;
  using Slice = kwiki::RowSlice<T, W, VPT>;
  const int r = G::rank();
  const int gs = G::size();
  const int nacc = H / W;
  const float inv_h = 1.f / static_cast<float>(H);
  kwiki::for_each_row_prefetched<G, Slice>(
      rows, [&](long long row, Slice& s) { s.load(x + row * H, r, gs, nacc); },
      [&](long long row, const Slice& s) {
        T* outr = out + row * H;
        float ss = 0.f;
#pragma unroll
        for (int i = 0; i < VPT; ++i) {
          if (r + i * gs < nacc) {
#pragma unroll
            for (int j = 0; j < W; ++j) {
              const float f = s.v[i].get(j);
              ss += f * f;
            }
          }
        }
        ss = G::sum(ss);
        const float rstd = rsqrtf(ss * inv_h + eps);
#pragma unroll
        for (int i = 0; i < VPT; ++i) {
          const int a = r + i * gs;
          if (a < nacc) {
            float w[W];
            float o[W];
            kwiki::load_f32<W>(weight + static_cast<long long>(a) * W, w);
#pragma unroll
            for (int j = 0; j < W; ++j) o[j] = s.v[i].get(j) * rstd * w[j];
            kwiki::store_f32<W>(outr + static_cast<long long>(a) * W, o);
          }
        }
      });
}

/// Rows longer than the register capacity (H a multiple of W): two passes, the second re-reads x (from L2).
template <typename T, int W>
KWIKI_GLOBAL void __launch_bounds__(1024)
rms_norm_loop_kernel(const T* __restrict__ x, const T* __restrict__ weight, T* __restrict__ out, long long rows, int H, float eps) {
  const int r = threadIdx.x;
  const int gs = blockDim.x;
  const int nacc = H / W;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * H;
    T* outr = out + row * H;
    float ss = 0.f;
    for (int a = r; a < nacc; a += gs) {
      float v[W];
      kwiki::load_f32<W>(xr + static_cast<long long>(a) * W, v);
#pragma unroll
      for (int j = 0; j < W; ++j) ss += v[j] * v[j];
    }
    ss = kwiki::block_reduce_sum(ss);
    const float rstd = rsqrtf(ss / static_cast<float>(H) + eps);
    for (int a = r; a < nacc; a += gs) {
      float v[W];
      float w[W];
      float o[W];
      kwiki::load_f32<W>(xr + static_cast<long long>(a) * W, v);
      kwiki::load_f32<W>(weight + static_cast<long long>(a) * W, w);
#pragma unroll
      for (int j = 0; j < W; ++j) o[j] = v[j] * rstd * w[j];
      kwiki::store_f32<W>(outr + static_cast<long long>(a) * W, o);
    }
  }
}

template <typename T, int W>
inline int launch_w(const T* x, const T* weight, T* out, long long rows, int H, float eps, kwiki_stream_t stream) {
  return kwiki::launch_rows<W>(
      H / W, rows, stream, [] { return rms_norm_loop_kernel<T, W>; },
      [](auto vpt, auto warp) { return rms_norm_kernel<T, W, decltype(vpt)::value, decltype(warp)::value>; }, x, weight, out, rows, H, eps);
}

/// Launches RMSNorm on `stream`; 0, the launch error, or -1 for sizes it cannot serve.
template <typename T>
inline int launch(const T* x, const T* weight, T* out, long long rows, long long H, float eps, kwiki_stream_t stream) {
  if (rows < 0 || H <= 0 || H > INT_MAX) return -1;
  if (rows == 0) return 0;
  constexpr int V = kwiki::vec_width<T>();
  const bool vec_ok = kwiki::aligned16(x) && kwiki::aligned16(weight) && kwiki::aligned16(out) && H % V == 0;
  if (vec_ok) return launch_w<T, V>(x, weight, out, rows, static_cast<int>(H), eps, stream);
  return launch_w<T, 1>(x, weight, out, rows, static_cast<int>(H), eps, stream);
}

}  // namespace kwiki_rms_norm

#ifdef KWIKI_DEFINE_LAUNCHER
#ifndef KWIKI_T
#error "define KWIKI_T (the element type) before including rms_norm.cuh"
#endif
KWIKI_EXPORT int kwiki_abi_version(void) { return 1; }

KWIKI_EXPORT int kwiki_launch(void* const* tensors, int num_tensors, const long long* dims, int num_dims, const double* params,
                              int num_params, void* stream) {
  if (tensors == nullptr || dims == nullptr || num_tensors != 3 || num_dims != 2 || num_params < 1 || params == nullptr) return -1;
  if (tensors[0] == nullptr || tensors[1] == nullptr || tensors[2] == nullptr) return -1;
  return kwiki_rms_norm::launch<KWIKI_T>(static_cast<const KWIKI_T*>(tensors[0]), static_cast<const KWIKI_T*>(tensors[1]),
                                         static_cast<KWIKI_T*>(tensors[2]), dims[0], dims[1], static_cast<float>(params[0]),
                                         static_cast<kwiki_stream_t>(stream));
}
#endif  // KWIKI_DEFINE_LAUNCHER

#endif  // KWIKI_RMS_NORM_CUH
