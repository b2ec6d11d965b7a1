// row_reduce.cuh: kwiki V0 template, sum / mean / max over the last dimension.
//
//   out[t] = sum(x[t, :])  |  mean(x[t, :])  |  max(x[t, :])        (op 0, 1, 2)
//
// ABI (ABI.md): tensors x[T,H], out[T]; dims T, H; params op (0 sum, 1 mean, 2 max).
// Accumulation in fp32, one rounding to KWIKI_T at the store (out has KWIKI_T elements).
// Semantics as torch: a NaN in the row makes the max NaN (fmaxf would drop it, so it is tracked
// explicitly); an empty row (H = 0) sums to 0 and has mean NaN; its max is refused (-1), as
// torch raises for a max over an empty dimension.
//
// Design (memory-bound): the row machinery of rms_norm.cuh. One row per block (one row per warp
// when the row is at most a warp of vectors), the row read once into registers with 16-byte
// loads while the previous row is reduced (resident grid striding over the rows); warp
// butterflies then one value per warp through shared memory; one element stored per row.
// Rows longer than 16384 elements (4096 on the scalar path) go to a looping kernel. The vector
// path needs x 16-byte aligned and H a multiple of the vector width; otherwise scalar (still
// coalesced) accesses.
//
// Status: new in session 3; compiled for sm_90a and gfx942/gfx90a, fp64 CPU reference in
// baseline/reference (tested); the kernel itself has not yet run on a GPU.
#ifndef KWIKI_ROW_REDUCE_CUH
#define KWIKI_ROW_REDUCE_CUH

#include "kwiki_compat.cuh"

namespace kwiki_row_reduce {

enum Op : int { kSum = 0, kMean = 1, kMax = 2 };

/// One thread's running reduction of its part of a row: an fp32 sum, or a max that keeps a NaN.
struct Accumulator {
  int op;
  float acc;

  KWIKI_DEVICE explicit Accumulator(int reduce_op) : op(reduce_op), acc(reduce_op == kMax ? -INFINITY : 0.f) {}

  KWIKI_DEVICE void add(float f) {
    if (op == kMax) acc = (f > acc || isnan(f)) ? f : acc;  // once NaN, no f compares greater: NaN sticks
    else acc += f;
  }

  /// The row's result, reduced over the row group G (every thread of the group must call it).
  template <typename G>
  KWIKI_DEVICE float finish(int H) const {
    if (op != kMax) {
      const float s = G::sum(acc);
      return op == kMean ? s / static_cast<float>(H) : s;  // H = 0: 0 / 0 = NaN, as torch's mean
    }
    // The group max drops NaN (it compares with >): count the NaN lanes apart.
    const float nan_lanes = G::sum(isnan(acc) ? 1.f : 0.f);
    const float m = G::max(isnan(acc) ? -INFINITY : acc);
    return nan_lanes > 0.f ? NAN : m;
  }
};

/// Row kept in registers: VPT accesses of W elements per thread (H a multiple of W); the next
/// row's slice is loaded while this one is reduced.
template <typename T, int W, int VPT, bool kWarpRow>
KWIKI_GLOBAL void __launch_bounds__(kwiki::row_block_bound(W, VPT))
row_reduce_kernel(const T* __restrict__ x, T* __restrict__ out, long long rows, int H, int op) {
  using G = kwiki::RowGroup<kWarpRow>;
  using Slice = kwiki::RowSlice<T, W, VPT>;
  const int r = G::rank();
  const int gs = G::size();
  const int nacc = H / W;
  kwiki::for_each_row_prefetched<G, Slice>(
      rows, [&](long long row, Slice& s) { s.load(x + row * H, r, gs, nacc); },
      [&](long long row, const Slice& s) {
        Accumulator a(op);
#pragma unroll
        for (int i = 0; i < VPT; ++i) {
          if (r + i * gs < nacc) {
#pragma unroll
            for (int j = 0; j < W; ++j) a.add(s.v[i].get(j));
          }
        }
        const float result = a.finish<G>(H);
        if (r == 0) out[row] = kwiki_from_float<T>(result);
      });
}

/// Rows longer than the register capacity (H a multiple of W): one block per row, strided loads.
template <typename T, int W>
KWIKI_GLOBAL void __launch_bounds__(1024)
row_reduce_loop_kernel(const T* __restrict__ x, T* __restrict__ out, long long rows, int H, int op) {
  const int r = threadIdx.x;
  const int nacc = H / W;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * H;
    Accumulator a(op);
    for (int k = r; k < nacc; k += blockDim.x) {
      float v[W];
      kwiki::load_f32<W>(xr + static_cast<long long>(k) * W, v);
#pragma unroll
      for (int j = 0; j < W; ++j) a.add(v[j]);
    }
    const float result = a.finish<kwiki::RowGroup<false>>(H);
    if (r == 0) out[row] = kwiki_from_float<T>(result);
  }
}

template <typename T, int W>
inline int launch_w(const T* x, T* out, long long rows, int H, int op, kwiki_stream_t stream) {
  return kwiki::launch_rows<W>(
      H / W, rows, stream, [] { return row_reduce_loop_kernel<T, W>; },
      [](auto vpt, auto warp) { return row_reduce_kernel<T, W, decltype(vpt)::value, decltype(warp)::value>; }, x, out, rows, H, op);
}

/// Launches the row reduction on `stream`; 0, the launch error, or -1 for what it cannot serve
/// (an unknown op, negative sizes, the max of empty rows).
template <typename T>
inline int launch(const T* x, T* out, long long rows, long long H, int op, kwiki_stream_t stream) {
  if (op != kSum && op != kMean && op != kMax) return -1;
  if (rows < 0 || H < 0 || H > INT_MAX || (H == 0 && op == kMax)) return -1;
  if (rows == 0) return 0;
  constexpr int V = kwiki::vec_width<T>();
  const bool vec_ok = kwiki::aligned16(x) && H % V == 0;  // out is written one element per row
  if (vec_ok) return launch_w<T, V>(x, out, rows, static_cast<int>(H), op, stream);
  return launch_w<T, 1>(x, out, rows, static_cast<int>(H), op, stream);
}

}  // namespace kwiki_row_reduce

#ifdef KWIKI_DEFINE_LAUNCHER
#ifndef KWIKI_T
#error "define KWIKI_T (the element type) before including row_reduce.cuh"
#endif
KWIKI_EXPORT int kwiki_abi_version(void) { return 1; }

KWIKI_EXPORT int kwiki_launch(void* const* tensors, int num_tensors, const long long* dims, int num_dims, const double* params,
                              int num_params, void* stream) {
  if (tensors == nullptr || dims == nullptr || num_tensors != 2 || num_dims != 2 || num_params < 1 || params == nullptr) return -1;
  if (tensors[0] == nullptr || tensors[1] == nullptr) return -1;
  const double op = params[0];
  if (op != 0.0 && op != 1.0 && op != 2.0) return -1;
  return kwiki_row_reduce::launch<KWIKI_T>(static_cast<const KWIKI_T*>(tensors[0]), static_cast<KWIKI_T*>(tensors[1]), dims[0], dims[1],
                                           static_cast<int>(op), static_cast<kwiki_stream_t>(stream));
}
#endif  // KWIKI_DEFINE_LAUNCHER

#endif  // KWIKI_ROW_REDUCE_CUH
