// fused_add_rms_norm.cuh: kwiki V0 template, residual add fused with RMSNorm (vLLM semantics).
//
//   residual[t, :] = T(x[t, :] + residual[t, :])           (sum in fp32, rounded once, in place)
//   out[t, :]      = residual[t, :] / sqrt(mean(residual[t, :]^2) + eps) * weight
//
// The norm reads the rounded residual (what is stored), statistics and scaling in fp32, one
// rounding at the store of out.
// ABI (ABI.md): tensors x[T,H], residual[T,H] (read, then overwritten), weight[H], out[T,H];
// dims T, H; params eps.
//
// Design: as rms_norm.cuh. One row per block (per warp for short rows); x and residual read
// once with 16-byte loads, the rounded sum kept packed in registers and written back to
// residual right away, the sum of squares reduced (warp butterflies, then shared memory), out
// written once. Rows longer than 16384 elements (4096 on the scalar path) are re-read from L2 by a looping kernel (the
// second pass re-reads this thread's own residual writes).
#ifndef KWIKI_FUSED_ADD_RMS_NORM_CUH
#define KWIKI_FUSED_ADD_RMS_NORM_CUH

#include "kwiki_compat.cuh"

namespace kwiki_fused_add_rms_norm {

/// Row kept in registers: VPT accesses of W elements per thread, plus one tail element.
template <typename T, int W, int VPT, bool kWarpRow>
KWIKI_GLOBAL void __launch_bounds__(kwiki::row_block_bound(W, VPT))
fused_add_rms_norm_kernel(const T* __restrict__ x, T* __restrict__ residual, const T* __restrict__ weight, T* __restrict__ out,
                          long long rows, int H, float eps) {
  using G = kwiki::RowGroup<kWarpRow>;
  const int r = G::rank();
  const int gs = G::size();
  const int nacc = H / W;
  const int tail = H - nacc * W;  // 0 unless a single unaligned-length row takes the vector path
  for (long long row = G::first_row(); row < rows; row += G::row_stride()) {
    const T* xr = x + row * H;
    T* rr = residual + row * H;
    T* outr = out + row * H;
    kwiki::Packed<T, W> v[VPT];  // the rounded x + residual, packed in registers
    float tv = 0.f;
    float ss = 0.f;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int a = r + i * gs;
      if (a < nacc) {
        const long long off = static_cast<long long>(a) * W;
        kwiki::Packed<T, W> xv;
        xv.load(xr + off);
        v[i].load(rr + off);
        float s[W];
#pragma unroll
        for (int j = 0; j < W; ++j) s[j] = xv.get(j) + v[i].get(j);
        v[i].pack(s);  // one rounding to T
        v[i].store(rr + off);
#pragma unroll
        for (int j = 0; j < W; ++j) {
          const float f = v[i].get(j);  // statistics of the stored (rounded) value
          ss += f * f;
        }
      }
    }
    if (W > 1 && r < tail) {
      const int e = nacc * W + r;
      const T s = kwiki_from_float<T>(kwiki_to_float(xr[e]) + kwiki_to_float(rr[e]));
      rr[e] = s;
      tv = kwiki_to_float(s);
      ss += tv * tv;
    }
    ss = G::sum(ss);
    const float rstd = rsqrtf(ss / static_cast<float>(H) + eps);
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int a = r + i * gs;
      if (a < nacc) {
        float w[W];
        float o[W];
        kwiki::load_f32<W>(weight + static_cast<long long>(a) * W, w);
#pragma unroll
        for (int j = 0; j < W; ++j) o[j] = v[i].get(j) * rstd * w[j];
        kwiki::store_f32<W>(outr + static_cast<long long>(a) * W, o);
      }
    }
    if (W > 1 && r < tail) outr[nacc * W + r] = kwiki_from_float<T>(tv * rstd * kwiki_to_float(weight[nacc * W + r]));
  }
}

/// Rows longer than the register capacity: pass 1 adds, stores the residual and sums squares;
/// pass 2 re-reads this thread's residual elements (from L2) and writes out.
template <typename T, int W>
KWIKI_GLOBAL void __launch_bounds__(1024)
fused_add_rms_norm_loop_kernel(const T* __restrict__ x, T* __restrict__ residual, const T* __restrict__ weight,
                               T* __restrict__ out, long long rows, int H, float eps) {
  const int r = threadIdx.x;
  const int gs = blockDim.x;
  const int nacc = H / W;
  const int tail = H - nacc * W;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * H;
    T* rr = residual + row * H;
    T* outr = out + row * H;
    float ss = 0.f;
    for (int a = r; a < nacc; a += gs) {
      const long long off = static_cast<long long>(a) * W;
      kwiki::Packed<T, W> xv;
      kwiki::Packed<T, W> rv;
      xv.load(xr + off);
      rv.load(rr + off);
      float s[W];
#pragma unroll
      for (int j = 0; j < W; ++j) s[j] = xv.get(j) + rv.get(j);
      rv.pack(s);
      rv.store(rr + off);
#pragma unroll
      for (int j = 0; j < W; ++j) {
        const float f = rv.get(j);
        ss += f * f;
      }
    }
    if (W > 1 && r < tail) {
      const int e = nacc * W + r;
      const T s = kwiki_from_float<T>(kwiki_to_float(xr[e]) + kwiki_to_float(rr[e]));
      rr[e] = s;
      const float f = kwiki_to_float(s);
      ss += f * f;
    }
    ss = kwiki::block_reduce_sum(ss);
    const float rstd = rsqrtf(ss / static_cast<float>(H) + eps);
    for (int a = r; a < nacc; a += gs) {
      const long long off = static_cast<long long>(a) * W;
      float v[W];
      float w[W];
      float o[W];
      kwiki::load_f32<W>(rr + off, v);
      kwiki::load_f32<W>(weight + off, w);
#pragma unroll
      for (int j = 0; j < W; ++j) o[j] = v[j] * rstd * w[j];
      kwiki::store_f32<W>(outr + off, o);
    }
    if (W > 1 && r < tail) {
      const int e = nacc * W + r;
      outr[e] = kwiki_from_float<T>(kwiki_to_float(rr[e]) * rstd * kwiki_to_float(weight[e]));
    }
  }
}

template <typename T, int W>
inline int launch_w(const T* x, T* residual, const T* weight, T* out, long long rows, int H, float eps, kwiki_stream_t stream) {
  const kwiki::RowLaunch L = kwiki::plan_row_launch<W>(H / W, rows);
  const dim3 grid(static_cast<unsigned>(L.grid));
  const dim3 block(static_cast<unsigned>(L.block));
  kwiki::dispatch_row<W>(L, [&](auto vpt_c, auto warp_c) {
    constexpr int VPT = decltype(vpt_c)::value;
    constexpr bool kWarpRow = decltype(warp_c)::value;
    if constexpr (VPT == 0) {
      fused_add_rms_norm_loop_kernel<T, W><<<grid, block, 0, stream>>>(x, residual, weight, out, rows, H, eps);
    } else {
      fused_add_rms_norm_kernel<T, W, VPT, kWarpRow><<<grid, block, 0, stream>>>(x, residual, weight, out, rows, H, eps);
    }
  });
  return kwiki_last_error();
}

/// Launches the fused residual add + RMSNorm on `stream`; 0, the launch error, or -1.
template <typename T>
inline int launch(const T* x, T* residual, const T* weight, T* out, long long rows, long long H, float eps, kwiki_stream_t stream) {
  if (rows < 0 || H <= 0 || H > INT_MAX) return -1;
  if (rows == 0) return 0;
  constexpr int V = kwiki::vec_width<T>();
  const bool vec_ok = kwiki::aligned16(x) && kwiki::aligned16(residual) && kwiki::aligned16(weight) && kwiki::aligned16(out) &&
                      (H % V == 0 || rows == 1);
  if (vec_ok) return launch_w<T, V>(x, residual, weight, out, rows, static_cast<int>(H), eps, stream);
  return launch_w<T, 1>(x, residual, weight, out, rows, static_cast<int>(H), eps, stream);
}

}  // namespace kwiki_fused_add_rms_norm

#ifdef KWIKI_DEFINE_LAUNCHER
#ifndef KWIKI_T
#error "define KWIKI_T (the element type) before including fused_add_rms_norm.cuh"
#endif
KWIKI_EXPORT int kwiki_abi_version(void) { return 1; }

KWIKI_EXPORT int kwiki_launch(void* const* tensors, int num_tensors, const long long* dims, int num_dims, const double* params,
                              int num_params, void* stream) {
  if (tensors == nullptr || dims == nullptr || num_tensors != 4 || num_dims != 2 || num_params < 1 || params == nullptr) return -1;
  for (int i = 0; i < 4; ++i)
    if (tensors[i] == nullptr) return -1;
  return kwiki_fused_add_rms_norm::launch<KWIKI_T>(
      static_cast<const KWIKI_T*>(tensors[0]), static_cast<KWIKI_T*>(tensors[1]), static_cast<const KWIKI_T*>(tensors[2]),
      static_cast<KWIKI_T*>(tensors[3]), dims[0], dims[1], static_cast<float>(params[0]), static_cast<kwiki_stream_t>(stream));
}
#endif  // KWIKI_DEFINE_LAUNCHER

#endif  // KWIKI_FUSED_ADD_RMS_NORM_CUH
