// layer_norm.cuh: kwiki V0 template, LayerNorm over the last dimension with weight and bias.
//
//   out[t, :] = (x[t, :] - mean) / sqrt(var + eps) * weight + bias     (var: population)
//
// ABI (ABI.md): tensors x[T,H], weight[H], bias[H], out[T,H]; dims T, H; params eps.
// Mean, variance and the affine transform in fp32, one rounding at the store.
//
// Design: as rms_norm.cuh (one row per block, or per warp for short rows; the row read once
// into registers with 16-byte loads, at least two a thread; this thread's weight and bias
// columns loaded before the reductions). The variance is two-pass over the registers (sum of
// (x - mean)^2, no E[x^2] - mean^2 cancellation): two reductions. Rows longer than 16384
// elements (4096 scalar) are re-read from L2 by a looping kernel (three passes: mean,
// variance, output).
#ifndef KWIKI_LAYER_NORM_CUH
#define KWIKI_LAYER_NORM_CUH

#include "kwiki_compat.cuh"

namespace kwiki_layer_norm {

/// Row kept in registers: VPT accesses of W elements per thread (H a multiple of W); the next
/// row's slice is loaded while this one is reduced and written.
template <typename T, int W, int VPT, bool kWarpRow>
KWIKI_GLOBAL void __launch_bounds__(kwiki::row_block_bound(W, VPT))
layer_norm_kernel(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ bias, T* __restrict__ out,
                  long long rows, int H, float eps) {
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
        // On the vector path at two or more accesses a thread, this thread's weight and bias
        // columns are loaded before the reductions so their latency hides behind the barriers
        // (16384 x 2560 bf16 on the H200: 53.0 -> 48.1 us at two accesses; bench/gpu/
        // row_launch_sweep.cu); elsewhere after them (early, one access a thread spilled).
        constexpr bool kEarly = W > 1 && VPT >= 2;
        kwiki::Packed<T, W> wv[kEarly ? VPT : 1], bv[kEarly ? VPT : 1];
        if constexpr (kEarly) {
#pragma unroll
          for (int i = 0; i < VPT; ++i) {
            const int a = r + i * gs;
            if (a < nacc) {
              wv[i].load(weight + static_cast<long long>(a) * W);
              bv[i].load(bias + static_cast<long long>(a) * W);
            }
          }
        }
        float sum = 0.f;
#pragma unroll
        for (int i = 0; i < VPT; ++i) {
          if (r + i * gs < nacc) {
#pragma unroll
            for (int j = 0; j < W; ++j) sum += s.v[i].get(j);
          }
        }
        const float mean = G::sum(sum) * inv_h;
        float sq = 0.f;
#pragma unroll
        for (int i = 0; i < VPT; ++i) {
          if (r + i * gs < nacc) {
#pragma unroll
            for (int j = 0; j < W; ++j) {
              const float d = s.v[i].get(j) - mean;
              sq += d * d;
            }
          }
        }
        const float rstd = rsqrtf(G::sum(sq) * inv_h + eps);
#pragma unroll
        for (int i = 0; i < VPT; ++i) {
          const int a = r + i * gs;
          if (a < nacc) {
            const long long off = static_cast<long long>(a) * W;
            float w[W];
            float b[W];
            if constexpr (kEarly) {
#pragma unroll
              for (int j = 0; j < W; ++j) {
                w[j] = wv[i].get(j);
                b[j] = bv[i].get(j);
              }
            } else {
              kwiki::load_f32<W>(weight + off, w);
              kwiki::load_f32<W>(bias + off, b);
            }
            float o[W];
#pragma unroll
            for (int j = 0; j < W; ++j) o[j] = (s.v[i].get(j) - mean) * rstd * w[j] + b[j];
            kwiki::store_f32<W>(outr + off, o);
          }
        }
      });
}

/// Rows longer than the register capacity (H a multiple of W): mean, variance and output passes over L2.
template <typename T, int W>
KWIKI_GLOBAL void __launch_bounds__(1024)
layer_norm_loop_kernel(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ bias, T* __restrict__ out,
                       long long rows, int H, float eps) {
  const int r = threadIdx.x;
  const int gs = blockDim.x;
  const int nacc = H / W;
  const float hf = static_cast<float>(H);
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * H;
    T* outr = out + row * H;
    float sum = 0.f;
    for (int a = r; a < nacc; a += gs) {
      float v[W];
      kwiki::load_f32<W>(xr + static_cast<long long>(a) * W, v);
#pragma unroll
      for (int j = 0; j < W; ++j) sum += v[j];
    }
    const float mean = kwiki::block_reduce_sum(sum) / hf;
    float sq = 0.f;
    for (int a = r; a < nacc; a += gs) {
      float v[W];
      kwiki::load_f32<W>(xr + static_cast<long long>(a) * W, v);
#pragma unroll
      for (int j = 0; j < W; ++j) sq += (v[j] - mean) * (v[j] - mean);
    }
    const float rstd = rsqrtf(kwiki::block_reduce_sum(sq) / hf + eps);
    for (int a = r; a < nacc; a += gs) {
      const long long off = static_cast<long long>(a) * W;
      float v[W];
      float w[W];
      float b[W];
      float o[W];
      kwiki::load_f32<W>(xr + off, v);
      kwiki::load_f32<W>(weight + off, w);
      kwiki::load_f32<W>(bias + off, b);
#pragma unroll
      for (int j = 0; j < W; ++j) o[j] = (v[j] - mean) * rstd * w[j] + b[j];
      kwiki::store_f32<W>(outr + off, o);
    }
  }
}

template <typename T, int W>
inline int launch_w(const T* x, const T* weight, const T* bias, T* out, long long rows, int H, float eps, kwiki_stream_t stream) {
  // At least two 16-byte accesses a thread (half the threads a row, more rows a multiprocessor):
  // 16384 x 2560 bf16 on the H200 50.5 -> 48.1 us, 4096 x 8192 42.4 -> 40.0 us (row_launch_sweep.cu).
  return kwiki::launch_rows<W, W == 1 ? 1 : 2>(
      H / W, rows, stream, [] { return layer_norm_loop_kernel<T, W>; },
      [](auto vpt, auto warp) { return layer_norm_kernel<T, W, decltype(vpt)::value, decltype(warp)::value>; }, x, weight, bias, out, rows, H, eps);
}

/// Launches LayerNorm on `stream`; 0, the launch error, or -1 for sizes it cannot serve.
template <typename T>
inline int launch(const T* x, const T* weight, const T* bias, T* out, long long rows, long long H, float eps, kwiki_stream_t stream) {
  if (rows < 0 || H <= 0 || H > INT_MAX) return -1;
  if (rows == 0) return 0;
  constexpr int V = kwiki::vec_width<T>();
  const bool vec_ok = kwiki::aligned16(x) && kwiki::aligned16(weight) && kwiki::aligned16(bias) && kwiki::aligned16(out) &&
                      H % V == 0;
  if (vec_ok) return launch_w<T, V>(x, weight, bias, out, rows, static_cast<int>(H), eps, stream);
  return launch_w<T, 1>(x, weight, bias, out, rows, static_cast<int>(H), eps, stream);
}

}  // namespace kwiki_layer_norm

#ifdef KWIKI_DEFINE_LAUNCHER
#ifndef KWIKI_T
#error "define KWIKI_T (the element type) before including layer_norm.cuh"
#endif
KWIKI_EXPORT int kwiki_abi_version(void) { return 1; }

KWIKI_EXPORT int kwiki_launch(void* const* tensors, int num_tensors, const long long* dims, int num_dims, const double* params,
                              int num_params, void* stream) {
  if (tensors == nullptr || dims == nullptr || num_tensors != 4 || num_dims != 2 || num_params < 1 || params == nullptr) return -1;
  for (int i = 0; i < 4; ++i)
    if (tensors[i] == nullptr) return -1;
  return kwiki_layer_norm::launch<KWIKI_T>(static_cast<const KWIKI_T*>(tensors[0]), static_cast<const KWIKI_T*>(tensors[1]),
                                           static_cast<const KWIKI_T*>(tensors[2]), static_cast<KWIKI_T*>(tensors[3]), dims[0], dims[1],
                                           static_cast<float>(params[0]), static_cast<kwiki_stream_t>(stream));
}
#endif  // KWIKI_DEFINE_LAUNCHER

#endif  // KWIKI_LAYER_NORM_CUH
