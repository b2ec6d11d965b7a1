// softmax.cuh: kwiki V0 template, softmax over the last dimension.
//
//   out[t, j] = exp(x[t, j] - max_j x[t, :]) / sum_j exp(x[t, j] - max_j x[t, :])
//
// ABI (ABI.md): tensors x[T,N], out[T,N]; dims T, N; no params.
// Max, exponentials and sum in fp32 (max-subtracted), one rounding at the store.
//
// Design: one row per block (per warp for short rows), the row read once into registers
// with 16-byte loads, the next row loaded while this one is reduced and written. Two cheap
// reductions (the row max, then the sum of exp(x - max)) rather than one merge of online
// pairs, whose every butterfly step costs two exponentials; exp(x - max) is kept in registers
// for the output when it fits (16 values a thread), so one exponential per element.
// Rows longer than 16384 elements (4096 scalar): a looping kernel accumulates online pairs
// (running max m, sum of exp(x - m)) while streaming the row, merges them in one reduction,
// then re-reads the row (from L2) to write.
#ifndef KWIKI_SOFTMAX_CUH
#define KWIKI_SOFTMAX_CUH

#include "kwiki_compat.cuh"

namespace kwiki_softmax {

/// Merges the online-softmax pair (m2, s2) into (m, s). Symmetric, so a butterfly leaves the
/// same pair in every lane. Empty pairs are (-inf, 0).
KWIKI_DEVICE void merge(float& m, float& s, float m2, float s2) {
  const float M = fmaxf(m, m2);
  if (M == -INFINITY) {
    s = 0.f;
  } else {
    s = s * expf(m - M) + s2 * expf(m2 - M);
  }
  m = M;
}

/// Folds n more values into this thread's running pair.
template <int N>
KWIKI_DEVICE void accumulate(float& m, float& s, const float (&f)[N]) {
  float mv = f[0];
#pragma unroll
  for (int j = 1; j < N; ++j) mv = fmaxf(mv, f[j]);
  if (mv == -INFINITY) return;  // all -inf: adds nothing
  if (mv > m) {
    s *= expf(m - mv);  // 0 when m was -inf
    m = mv;
  }
#pragma unroll
  for (int j = 0; j < N; ++j) s += expf(f[j] - m);
}

/// Reduces the pair over the row group; every thread of the group gets the row's pair.
template <bool kWarpRow>
KWIKI_DEVICE void group_reduce(float& m, float& s) {
#pragma unroll
  for (int offset = KWIKI_WARP_SIZE / 2; offset > 0; offset >>= 1) {
    const float m2 = kwiki_shfl_xor(m, offset);
    const float s2 = kwiki_shfl_xor(s, offset);
    merge(m, s, m2, s2);
  }
  if constexpr (!kWarpRow) {
    __shared__ float part_m[KWIKI_MAX_WARPS];
    __shared__ float part_s[KWIKI_MAX_WARPS];
    __shared__ float res_m;
    __shared__ float res_s;
    const int lane = threadIdx.x % KWIKI_WARP_SIZE;
    const int warp = threadIdx.x / KWIKI_WARP_SIZE;
    if (lane == 0) {
      part_m[warp] = m;
      part_s[warp] = s;
    }
    __syncthreads();
    if (warp == 0) {
      const int num_warps = (blockDim.x + KWIKI_WARP_SIZE - 1) / KWIKI_WARP_SIZE;
      m = lane < num_warps ? part_m[lane] : -INFINITY;
      s = lane < num_warps ? part_s[lane] : 0.f;
#pragma unroll
      for (int offset = KWIKI_WARP_SIZE / 2; offset > 0; offset >>= 1) {
        const float m2 = kwiki_shfl_xor(m, offset);
        const float s2 = kwiki_shfl_xor(s, offset);
        merge(m, s, m2, s2);
      }
      if (lane == 0) {
        res_m = m;
        res_s = s;
      }
    }
    __syncthreads();
    m = res_m;
    s = res_s;
  }
}

/// exp for the softmax: the accurate expf for fp32 outputs; the fast exponential (ex2 of a
/// scaled argument, a few ulp of fp32 off) for 16-bit outputs, whose rounding (2^-9 for bf16)
/// hides it, and which halves the special-function work that bounds the 16-bit kernel.
template <typename T>
KWIKI_DEVICE float softmax_exp(float v) {
  if constexpr (sizeof(T) == 2) return __expf(v);
  else return expf(v);
}

/// Row kept in registers: VPT accesses of W elements per thread (N a multiple of W); the next
/// row's slice is loaded while this one is reduced and written.
template <typename T, int W, int VPT, bool kWarpRow>
KWIKI_GLOBAL void __launch_bounds__(kwiki::row_block_bound(W, VPT))
softmax_kernel(const T* __restrict__ x, T* __restrict__ out, long long rows, int N) {
  using G = kwiki::RowGroup<kWarpRow>;
  using Slice = kwiki::RowSlice<T, W, VPT>;
  const int r = G::rank();
  const int gs = G::size();
  const int nacc = N / W;
  kwiki::for_each_row_prefetched<G, Slice>(
      rows, [&](long long row, Slice& sl) { sl.load(x + row * N, r, gs, nacc); },
      [&](long long row, const Slice& sl) {
        T* outr = out + row * N;
        float m = -INFINITY;
#pragma unroll
        for (int i = 0; i < VPT; ++i) {
          if (r + i * gs < nacc) {
#pragma unroll
            for (int j = 0; j < W; ++j) m = fmaxf(m, sl.v[i].get(j));
          }
        }
        m = G::max(m);  // the row maximum first: the sum then needs no rescaling exponentials
        constexpr bool kKeepExp = VPT * W <= 16;  // keep exp(x - m) in registers when they fit
        float e[kKeepExp ? VPT : 1][W];
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < VPT; ++i) {
          if (r + i * gs < nacc) {
#pragma unroll
            for (int j = 0; j < W; ++j) {
              const float ej = softmax_exp<T>(sl.v[i].get(j) - m);
              if constexpr (kKeepExp) e[i][j] = ej;
              s += ej;
            }
          }
        }
        const float inv = 1.f / G::sum(s);
#pragma unroll
        for (int i = 0; i < VPT; ++i) {
          const int a = r + i * gs;
          if (a < nacc) {
            float o[W];
#pragma unroll
            for (int j = 0; j < W; ++j) {
              if constexpr (kKeepExp) o[j] = e[i][j] * inv;
              else o[j] = softmax_exp<T>(sl.v[i].get(j) - m) * inv;
            }
            kwiki::store_f32<W>(outr + static_cast<long long>(a) * W, o);
          }
        }
      });
}

/// Rows longer than the register capacity (H a multiple of W): the online pair while streaming, then a second
/// read (from L2) to write.
template <typename T, int W>
KWIKI_GLOBAL void __launch_bounds__(1024)
softmax_loop_kernel(const T* __restrict__ x, T* __restrict__ out, long long rows, int N) {
  const int r = threadIdx.x;
  const int gs = blockDim.x;
  const int nacc = N / W;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * N;
    T* outr = out + row * N;
    float m = -INFINITY;
    float s = 0.f;
    for (int a = r; a < nacc; a += gs) {
      float f[W];
      kwiki::load_f32<W>(xr + static_cast<long long>(a) * W, f);
      accumulate<W>(m, s, f);
    }
    group_reduce<false>(m, s);
    const float inv = 1.f / s;
    for (int a = r; a < nacc; a += gs) {
      const long long off = static_cast<long long>(a) * W;
      float f[W];
      float o[W];
      kwiki::load_f32<W>(xr + off, f);
#pragma unroll
      for (int j = 0; j < W; ++j) o[j] = expf(f[j] - m) * inv;
      kwiki::store_f32<W>(outr + off, o);
    }
  }
}

template <typename T, int W>
inline int launch_w(const T* x, T* out, long long rows, int N, kwiki_stream_t stream) {
  return kwiki::launch_rows<W>(
      N / W, rows, stream, [] { return softmax_loop_kernel<T, W>; },
      [](auto vpt, auto warp) { return softmax_kernel<T, W, decltype(vpt)::value, decltype(warp)::value>; }, x, out, rows, N);
}

/// Launches the row softmax on `stream`; 0, the launch error, or -1 for sizes it cannot serve.
template <typename T>
inline int launch(const T* x, T* out, long long rows, long long N, kwiki_stream_t stream) {
  if (rows < 0 || N <= 0 || N > INT_MAX) return -1;
  if (rows == 0) return 0;
  constexpr int V = kwiki::vec_width<T>();
  const bool vec_ok = kwiki::aligned16(x) && kwiki::aligned16(out) && N % V == 0;
  if (vec_ok) return launch_w<T, V>(x, out, rows, static_cast<int>(N), stream);
  return launch_w<T, 1>(x, out, rows, static_cast<int>(N), stream);
}

}  // namespace kwiki_softmax

#ifdef KWIKI_DEFINE_LAUNCHER
#ifndef KWIKI_T
#error "define KWIKI_T (the element type) before including softmax.cuh"
#endif
KWIKI_EXPORT int kwiki_abi_version(void) { return 1; }

KWIKI_EXPORT int kwiki_launch(void* const* tensors, int num_tensors, const long long* dims, int num_dims, const double* params,
                              int num_params, void* stream) {
  (void)params;
  (void)num_params;
  if (tensors == nullptr || dims == nullptr || num_tensors != 2 || num_dims != 2) return -1;
  if (tensors[0] == nullptr || tensors[1] == nullptr) return -1;
  return kwiki_softmax::launch<KWIKI_T>(static_cast<const KWIKI_T*>(tensors[0]), static_cast<KWIKI_T*>(tensors[1]), dims[0], dims[1],
                                        static_cast<kwiki_stream_t>(stream));
}
#endif  // KWIKI_DEFINE_LAUNCHER

#endif  // KWIKI_SOFTMAX_CUH
