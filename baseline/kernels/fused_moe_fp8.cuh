// fused_moe_fp8.cuh: kwiki V0 template, fused mixture-of-experts MLP with block-scaled fp8 weights
// (DeepSeek-V3 / Qwen3-FP8 as vLLM and SGLang serve them: w8a8 with 1 x 128 activation groups and
// 128 x 128 weight blocks), deterministic routing, no float atomics.
//
//   for each token t, group g of 128 along H:  a_s[t, g] = max(amax(|x[t, g]|), 1e-10) * fp32(1 / fp8_max),
//                                              a_q[t, g] = fp8(clamp(x[t, g] / a_s[t, g]))
//   for each (t, slot s) with e = topk_ids[t, s] in [0, E):
//     gate/up[n] = T(sum_kb (a_s[t, kb] * w13_s[e, n / 128, kb]) * (a_q[t, kb] . w13[e, n, kb]))  (fp32, rows n and I + n)
//     act[n]     = T(T(silu(gate)) * up), then quantized as above per group of 128 along I: act_q, act_s
//     y[h]       = T(sum_kb (act_s[kb] * w2_s[e, h / 128, kb]) * (act_q[kb] . w2[e, h, kb]))       (fp32, one rounding)
//   out[t, h] = T(sum over s in slot order of topk_weights[t, s] * y[t, s, h])                  (fp32)
// which is vLLM's torch_experts with block_shape [128, 128] (per_token_group_quant_fp8 before each
// GEMM, native_w8a8_block_matmul's promotion of every 128-K block in fp32, bf16 GEMM outputs).
// A slot whose id is outside [0, E) adds nothing; a token with no valid slot gives zeros.
//
// ABI (ABI.md): tensors hidden[T,H] (T), w13[E,2I,H] (fp8 bytes, gate rows then up rows), w2[E,H,I]
// (fp8 bytes), w13_scale[E,2I/128,H/128] (fp32), w2_scale[E,H/128,I/128] (fp32), topk_weights[T,k]
// (fp32), topk_ids[T,k] (int32), out[T,H], then the scratch: chunk_counts, expert_offsets, sorted_ids,
// block_expert (int32, sized as fused_moe's), a_q[T,H] (fp8 bytes), a_scale[T,H/128] (fp32),
// act_q[T*k,I] (fp8 bytes), act_scale[T*k,I/128] (fp32), slot_out[T*k,H] (fp32); dims T, H, I, E, k, BM
// (BM must be 16); params fnuz (0: e4m3fn, max 448; 1: e4m3fnuz, max 240). Served: H and I multiples
// of 128 (the reference's group quantization asserts it), the fp8 tensors and hidden 16-byte aligned,
// and fused_moe's limits on T*k, E and k.
//
// Design, seven kernels, reusing fused_moe.cuh's routing and weighted sum and fp8_block_gemm.cuh's
// per-block promotion and fp8 decoding (fp8_quant.cuh's exact e4m3 encoder for the quantizations):
// 1-3. routing as fused_moe (count, scan, scatter: a stable sort of the (token, slot) entries by
//      expert, each expert's rows padded to 16; block_expert names each 16-row block's expert).
// 4. token quant: a thread per (token, 128-group) of hidden: amax, then a second read to quantize
//    (16-byte loads), the group's 128 bytes stored 16 at a time.
// 5. gate/up: a block per (16 sorted rows, 128 columns of I) over the gate rows and the up rows of
//    the same columns (256 weight rows, inside one 128-row scale block each); 32-wide K steps of
//    fp8 rows read as 16-byte chunks and decoded to fp32 in shared memory; each 128-K block's fp32
//    partial scaled by a_s * w_s and added to the fp32 accumulator (the promotion). The epilogue
//    rounds as the reference (gate, up, silu, product to T), takes each row's amax over the block's
//    128 columns (one quantization group) and stores act_q and act_scale.
// 6. down: a block per (16 sorted rows, 128 columns of H), the same loop over act_q and w2[e];
//    the result rounded to T (the reference's GEMM output) and stored by entry into slot_out.
// 7. combine: fused_moe's, the weighted sum over the k slots in slot order.
// CUDA cores on both platforms in V0 (not yet run on a GPU).
#ifndef KWIKI_FUSED_MOE_FP8_CUH
#define KWIKI_FUSED_MOE_FP8_CUH

// The included templates must not define their own launchers: this one does, below.
#ifdef KWIKI_DEFINE_LAUNCHER
#define KWIKI_FUSED_MOE_FP8_LAUNCHER 1
#undef KWIKI_DEFINE_LAUNCHER
#endif
#include "fused_moe.cuh"
#include "fp8_block_gemm.cuh"
#include "fp8_quant.cuh"
#ifdef KWIKI_FUSED_MOE_FP8_LAUNCHER
#define KWIKI_DEFINE_LAUNCHER 1
#endif

namespace kwiki_fused_moe_fp8 {

using kwiki_fused_moe::Shape;
constexpr int kGroup = 128;                                        // quantization group and scale block (both GEMMs)
constexpr int kBlockM = kwiki_fused_moe::kBlockM;                  // 16 sorted rows a block (the routing's padding)
constexpr int kCols = 128;                                         // output columns a GEMM block owns (one scale block)
constexpr int kStep = 32;                                          // K bytes a shared-memory step holds
constexpr int kThreads = 256;                                      // 128 columns x 2 row groups
constexpr int kRows = kBlockM / (kThreads / kCols);                // rows a thread accumulates: 8
constexpr int kChunksPerRow = kStep / 16;                          // 16-byte chunks of one row in a step
constexpr int kQuantThreads = 128;
static_assert(kGroup % kStep == 0 && kStep % 16 == 0, "a step lies in one scale block, in whole 16-byte chunks");
static_assert(kRows * (kThreads / kCols) == kBlockM, "the row groups cover the block's rows");

/// float -> e4m3 byte (round to nearest even), x already clamped to +-fp8_max.
template <bool kFnuz>
KWIKI_DEVICE unsigned char encode(float x) {
  return kwiki_fp8_quant::float_to_e4m3<kFnuz>(x);
}

/// The reference's group scale, max(amax, 1e-10) / fp8_max, as torch computes it on a GPU: fp8_max
/// is a Python number, and torch's CUDA division (HIP's is the same source) multiplies by the
/// divisor's fp32 reciprocal; on the CPU torch divides (the twin's kQuotient). One last-ulp apart
/// in about half the groups, which moves fp8 codes at rounding ties (NaN stays NaN, as torch's clamp).
KWIKI_DEVICE float group_scale(float amax, float fp8_max) { return (isnan(amax) ? amax : fmaxf(amax, 1e-10f)) * (1.0f / fp8_max); }

/// fp8(clamp(x / scale, -fp8_max, fp8_max)) with the true fp32 division, as the reference divides.
template <bool kFnuz>
KWIKI_DEVICE unsigned char quantize(float x, float scale, float fp8_max) {
  return encode<kFnuz>(fminf(fmaxf(x / scale, -fp8_max), fp8_max));
}

/// Kernel 4: a_q and a_scale of hidden, a thread per (token, 128-group).
template <typename T, bool kFnuz>
KWIKI_GLOBAL void __launch_bounds__(kQuantThreads)
moe_fp8_token_quant_kernel(const T* __restrict__ hidden, unsigned char* __restrict__ a_q, float* __restrict__ a_scale, Shape s, float fp8_max) {
  const int groups = s.H / kGroup;
  const long long idx = static_cast<long long>(blockIdx.x) * kQuantThreads + threadIdx.x;
  if (idx >= static_cast<long long>(s.T) * groups) return;
  const long long t = idx / groups, g = idx % groups;
  const T* x = hidden + t * s.H + g * kGroup;
  constexpr int W = kwiki::vec_width<T>();
  float amax = 0.f;
  for (int k = 0; k < kGroup; k += W) {
    float f[W];
    kwiki::load_f32<W>(x + k, f);
#pragma unroll
    for (int j = 0; j < W; ++j) amax = kwiki_fp8_quant::abs_max(amax, f[j]);
  }
  const float scale = group_scale(amax, fp8_max);
  a_scale[idx] = scale;
  unsigned char* q = a_q + t * s.H + g * kGroup;
  for (int k = 0; k < kGroup; k += 16) {
    kwiki::Bytes<16> b;
#pragma unroll
    for (int j = 0; j < 16; j += W) {
      float f[W];
      kwiki::load_f32<W>(x + k + j, f);
#pragma unroll
      for (int i = 0; i < W; ++i) b.b[j + i] = quantize<kFnuz>(f[i], scale, fp8_max);
    }
    *reinterpret_cast<kwiki::Bytes<16>*>(q + k) = b;
  }
}

/// The block-scaled inner product of kernels 5 and 6 over K (a multiple of 128): the block's 16 rows
/// of fp8 activations (row r at a + a_row(r), negative: a padding row) against kParts x 128 fp8 weight
/// rows (row q at w + w_row(q)); thread (c, row group) accumulates rows r0 .. r0 + 7 against weight
/// rows c + 128 p. After each 128-K block the fp32 partial is scaled by a_scale(r, kb) * w_scale(p, kb)
/// (one fp32 product, as the reference's As * Bs) and added: fp8_block_gemm's promotion. Ends past its
/// last barrier.
template <bool kFnuz, int kParts, typename ARow, typename WRow, typename AScale, typename WScale>
KWIKI_DEVICE void block_scaled_rows(float (&xs)[kBlockM][kStep + 1], float (*ws)[kStep + 1], const unsigned char* __restrict__ a, ARow a_row,
                                    const unsigned char* __restrict__ w, WRow w_row, int K, AScale a_scale, WScale w_scale, int c, int r0,
                                    float (&acc)[kParts][kRows]) {
  constexpr int kAChunks = kBlockM * kChunksPerRow, kChunks = kAChunks + kParts * kCols * kChunksPerRow;
  for (int kb = 0; kb * kGroup < K; ++kb) {
    float part[kParts][kRows] = {};
    for (int k0 = kb * kGroup; k0 < (kb + 1) * kGroup; k0 += kStep) {
      for (int idx = threadIdx.x; idx < kChunks; idx += kThreads) {
        const bool is_a = idx < kAChunks;
        const int ch = is_a ? idx : idx - kAChunks, r = ch / kChunksPerRow, kk = (ch % kChunksPerRow) * 16;
        const long long at = is_a ? a_row(r) : w_row(r);
        float* dst = is_a ? &xs[r][kk] : &ws[r][kk];
        if (at >= 0) {
          const kwiki::Vec<unsigned char> v = kwiki::load_vec((is_a ? a : w) + at + k0 + kk);
#pragma unroll
          for (int j = 0; j < 16; ++j) dst[j] = kwiki_fp8_block_gemm::fp8_to_float<kFnuz>(v.v[j]);
        } else {
#pragma unroll
          for (int j = 0; j < 16; ++j) dst[j] = 0.f;  // a padding row or a weight row past the matrix adds nothing
        }
      }
      __syncthreads();
#pragma unroll 4
      for (int kk = 0; kk < kStep; ++kk) {
        float wv[kParts];
#pragma unroll
        for (int p = 0; p < kParts; ++p) wv[p] = ws[p * kCols + c][kk];
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const float xv = xs[r0 + r][kk];
#pragma unroll
          for (int p = 0; p < kParts; ++p) part[p][r] = fmaf(xv, wv[p], part[p][r]);
        }
      }
      __syncthreads();
    }
#pragma unroll
    for (int p = 0; p < kParts; ++p) {
      const float sw = w_scale(p, kb);
#pragma unroll
      for (int r = 0; r < kRows; ++r) acc[p][r] = __fadd_rn(acc[p][r], __fmul_rn(part[p][r], __fmul_rn(a_scale(r0 + r, kb), sw)));
    }
  }
}

/// Kernel 5: act_q and act_scale for the block's 16 sorted rows and 128 columns of I (one group).
template <typename T, bool kFnuz>
KWIKI_GLOBAL void __launch_bounds__(kThreads)
moe_fp8_gate_up_kernel(const unsigned char* __restrict__ a_q, const float* __restrict__ a_scale, const unsigned char* __restrict__ w13,
                       const float* __restrict__ w13_scale, const int* __restrict__ sorted_ids, const int* __restrict__ block_expert,
                       unsigned char* __restrict__ act_q, float* __restrict__ act_scale, Shape s, float fp8_max) {
  __shared__ int rows[kBlockM];
  __shared__ float scales[kBlockM];
  __shared__ float xs[kBlockM][kStep + 1];
  __shared__ float ws[2 * kCols][kStep + 1];  // gate rows n0.., then the up rows I + n0..; the epilogue's act after
  const int col_blocks = s.I / kCols;
  const int mb = static_cast<int>(blockIdx.x / col_blocks), n0 = static_cast<int>(blockIdx.x % col_blocks) * kCols;
  const int e = block_expert[mb];
  if (e < 0) return;  // past the routed rows: the whole block leaves before any barrier
  const int tid = threadIdx.x, c = tid % kCols, r0 = (tid / kCols) * kRows;
  if (tid < kBlockM) rows[tid] = sorted_ids[mb * kBlockM + tid];
  __syncthreads();
  const int hb = s.H / kGroup, nb = 2 * s.I / kGroup;  // scale blocks along H; scale rows of w13[e]
  const unsigned char* w = w13 + static_cast<size_t>(e) * 2 * s.I * s.H;
  const float* w_s = w13_scale + static_cast<size_t>(e) * nb * hb;
  auto a_row = [&](int r) -> long long {
    const int j = rows[r];
    return j >= 0 ? static_cast<long long>(j / s.K) * s.H : -1;
  };
  auto w_row = [&](int q) -> long long { return static_cast<long long>(q < kCols ? n0 + q : s.I + n0 + q - kCols) * s.H; };
  auto as = [&](int r, int kb) -> float {
    const int j = rows[r];
    return j >= 0 ? a_scale[static_cast<long long>(j / s.K) * hb + kb] : 0.f;
  };
  auto wsc = [&](int p, int kb) -> float { return w_s[static_cast<long long>((p == 0 ? n0 : s.I + n0) / kGroup) * hb + kb]; };
  float acc[2][kRows] = {};
  block_scaled_rows<kFnuz, 2>(xs, ws, a_q, a_row, w, w_row, s.H, as, wsc, c, r0, acc);
  // The reference's roundings (bf16 GEMM output, SiluAndMul in T), then one quantization group per row.
  float (*act)[kCols + 1] = reinterpret_cast<float (*)[kCols + 1]>(&ws[0][0]);  // the staging is done (last barrier passed)
  static_assert(kBlockM * (kCols + 1) <= 2 * kCols * (kStep + 1), "act fits in the staging buffer");
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float g = kwiki_fused_moe::round_through<T>(acc[0][r]), u = kwiki_fused_moe::round_through<T>(acc[1][r]);
    const float silu = kwiki_fused_moe::round_through<T>(g / (1.0f + expf(-g)));
    act[r0 + r][c] = kwiki_fused_moe::round_through<T>(silu * u);
  }
  __syncthreads();
  const int groups = s.I / kGroup;
  if (tid < kBlockM && rows[tid] >= 0) {
    float amax = 0.f;
    for (int n = 0; n < kCols; ++n) amax = kwiki_fp8_quant::abs_max(amax, act[tid][n]);
    scales[tid] = group_scale(amax, fp8_max);
    act_scale[static_cast<long long>(rows[tid]) * groups + n0 / kGroup] = scales[tid];
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int j = rows[r0 + r];
    if (j >= 0) act_q[static_cast<size_t>(j) * s.I + n0 + c] = quantize<kFnuz>(act[r0 + r][c], scales[r0 + r], fp8_max);
  }
}

/// Kernel 6: slot_out[j, h] = T(act_q[j] x w2[e, h] block-scaled) for the block's 16 sorted rows and 128 columns of H.
template <typename T, bool kFnuz>
KWIKI_GLOBAL void __launch_bounds__(kThreads)
moe_fp8_down_kernel(const unsigned char* __restrict__ act_q, const float* __restrict__ act_scale, const unsigned char* __restrict__ w2,
                    const float* __restrict__ w2_scale, const int* __restrict__ sorted_ids, const int* __restrict__ block_expert,
                    float* __restrict__ slot_out, Shape s) {
  __shared__ int rows[kBlockM];
  __shared__ float xs[kBlockM][kStep + 1];
  __shared__ float ws[kCols][kStep + 1];
  const int col_blocks = s.H / kCols;
  const int mb = static_cast<int>(blockIdx.x / col_blocks), h0 = static_cast<int>(blockIdx.x % col_blocks) * kCols;
  const int e = block_expert[mb];
  if (e < 0) return;
  const int tid = threadIdx.x, c = tid % kCols, r0 = (tid / kCols) * kRows;
  if (tid < kBlockM) rows[tid] = sorted_ids[mb * kBlockM + tid];
  __syncthreads();
  const int ib = s.I / kGroup, hb = s.H / kGroup;  // scale blocks along I; scale rows of w2[e]
  const unsigned char* w = w2 + static_cast<size_t>(e) * s.H * s.I;
  const float* w_s = w2_scale + static_cast<size_t>(e) * hb * ib;
  auto a_row = [&](int r) -> long long {
    const int j = rows[r];
    return j >= 0 ? static_cast<long long>(j) * s.I : -1;
  };
  auto w_row = [&](int q) -> long long { return static_cast<long long>(h0 + q) * s.I; };
  auto as = [&](int r, int kb) -> float {
    const int j = rows[r];
    return j >= 0 ? act_scale[static_cast<long long>(j) * ib + kb] : 0.f;
  };
  auto wsc = [&](int, int kb) -> float { return w_s[static_cast<long long>(h0 / kGroup) * ib + kb]; };
  float acc[1][kRows] = {};
  block_scaled_rows<kFnuz, 1>(xs, ws, act_q, a_row, w, w_row, s.I, as, wsc, c, r0, acc);
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int j = rows[r0 + r];
    if (j >= 0) slot_out[static_cast<size_t>(j) * s.H + h0 + c] = kwiki_fused_moe::round_through<T>(acc[0][r]);
  }
}

/// Enqueues the seven kernels on `stream`; 0, the first launch error, or -1 for sizes or pointers it
/// cannot serve. Never synchronizes.
template <typename T, bool kFnuz>
inline int launch_format(const T* hidden, const unsigned char* w13, const unsigned char* w2, const float* w13_scale, const float* w2_scale,
                         const float* topk_weights, const int* topk_ids, T* out, int* chunk_counts, int* expert_offsets, int* sorted_ids,
                         int* block_expert, unsigned char* a_q, float* a_scale, unsigned char* act_q, float* act_scale, float* slot_out,
                         const Shape& s, kwiki_stream_t stream) {
  const float fp8_max = kFnuz ? 240.f : 448.f;
  int err = 0;
  kwiki_fused_moe::moe_count_kernel<T><<<dim3(static_cast<unsigned>(s.chunks)), dim3(kwiki_fused_moe::kChunk), 0, stream>>>(topk_ids, chunk_counts, s);
  if ((err = kwiki_last_error()) != 0) return err;
  kwiki_fused_moe::moe_scan_kernel<T><<<dim3(1), dim3(kwiki_fused_moe::kScanThreads), 0, stream>>>(chunk_counts, expert_offsets, sorted_ids,
                                                                                                     block_expert, s);
  if ((err = kwiki_last_error()) != 0) return err;
  kwiki_fused_moe::moe_scatter_kernel<T><<<dim3(static_cast<unsigned>(s.chunks)), dim3(kwiki_fused_moe::kChunk), 0, stream>>>(topk_ids, chunk_counts,
                                                                                                                               sorted_ids, s);
  if ((err = kwiki_last_error()) != 0) return err;
  const long long groups = static_cast<long long>(s.T) * (s.H / kGroup);
  const dim3 quant_grid(static_cast<unsigned>((groups + kQuantThreads - 1) / kQuantThreads));
  moe_fp8_token_quant_kernel<T, kFnuz><<<quant_grid, dim3(kQuantThreads), 0, stream>>>(hidden, a_q, a_scale, s, fp8_max);
  if ((err = kwiki_last_error()) != 0) return err;
  const dim3 up_grid(static_cast<unsigned>(static_cast<long long>(s.row_blocks) * (s.I / kCols)));
  moe_fp8_gate_up_kernel<T, kFnuz><<<up_grid, dim3(kThreads), 0, stream>>>(a_q, a_scale, w13, w13_scale, sorted_ids, block_expert, act_q, act_scale,
                                                                           s, fp8_max);
  if ((err = kwiki_last_error()) != 0) return err;
  const dim3 down_grid(static_cast<unsigned>(static_cast<long long>(s.row_blocks) * (s.H / kCols)));
  moe_fp8_down_kernel<T, kFnuz><<<down_grid, dim3(kThreads), 0, stream>>>(act_q, act_scale, w2, w2_scale, sorted_ids, block_expert, slot_out, s);
  if ((err = kwiki_last_error()) != 0) return err;
  kwiki_fused_moe::moe_combine_kernel<T><<<dim3(static_cast<unsigned>(s.T)), dim3(kwiki_fused_moe::kCombineThreads), 0, stream>>>(
      topk_weights, topk_ids, slot_out, out, s);
  return kwiki_last_error();
}

/// The sizes and pointers launch() serves (see the header comment), then the launch in the format fnuz names.
template <typename T>
inline int launch(const T* hidden, const unsigned char* w13, const unsigned char* w2, const float* w13_scale, const float* w2_scale,
                  const float* topk_weights, const int* topk_ids, T* out, int* chunk_counts, int* expert_offsets, int* sorted_ids, int* block_expert,
                  unsigned char* a_q, float* a_scale, unsigned char* act_q, float* act_scale, float* slot_out, long long T_, long long H, long long I,
                  long long E, long long K, long long BM, double fnuz, kwiki_stream_t stream) {
  Shape s;
  if (!kwiki_fused_moe::make_shape(T_, H, I, E, K, BM, &s)) return -1;
  if (H % kGroup != 0 || I % kGroup != 0 || !(fnuz == 0.0 || fnuz == 1.0)) return -1;
  if (T_ * (H / kGroup) > 0x7fffffffll * kQuantThreads) return -1;  // the token-quant grid (one dimension)
  if (T_ == 0) return 0;
  if (!hidden || !w13 || !w2 || !w13_scale || !w2_scale || !topk_weights || !topk_ids || !out || !chunk_counts || !expert_offsets || !sorted_ids ||
      !block_expert || !a_q || !a_scale || !act_q || !act_scale || !slot_out)
    return -1;
  // Every fp8 row and hidden row the kernels read as 16-byte chunks starts on a 16-byte boundary.
  if (!kwiki::aligned16(hidden) || !kwiki::aligned16(w13) || !kwiki::aligned16(w2) || !kwiki::aligned16(a_q) || !kwiki::aligned16(act_q)) return -1;
  if (fnuz != 0.0)
    return launch_format<T, true>(hidden, w13, w2, w13_scale, w2_scale, topk_weights, topk_ids, out, chunk_counts, expert_offsets, sorted_ids,
                                  block_expert, a_q, a_scale, act_q, act_scale, slot_out, s, stream);
  return launch_format<T, false>(hidden, w13, w2, w13_scale, w2_scale, topk_weights, topk_ids, out, chunk_counts, expert_offsets, sorted_ids,
                                 block_expert, a_q, a_scale, act_q, act_scale, slot_out, s, stream);
}

}  // namespace kwiki_fused_moe_fp8

#ifdef KWIKI_DEFINE_LAUNCHER
#ifndef KWIKI_T
#error "define KWIKI_T (the activation and output element type) before including fused_moe_fp8.cuh"
#endif
KWIKI_EXPORT int kwiki_abi_version(void) { return 1; }

KWIKI_EXPORT int kwiki_launch(void* const* tensors, int num_tensors, const long long* dims, int num_dims, const double* params, int num_params,
                              void* stream) {
  if (tensors == nullptr || dims == nullptr || params == nullptr || num_tensors != 17 || num_dims != 6 || num_params < 1) return -1;
  typedef KWIKI_T T;
  typedef unsigned char u8;
  return kwiki_fused_moe_fp8::launch<T>(
      static_cast<const T*>(tensors[0]), static_cast<const u8*>(tensors[1]), static_cast<const u8*>(tensors[2]), static_cast<const float*>(tensors[3]),
      static_cast<const float*>(tensors[4]), static_cast<const float*>(tensors[5]), static_cast<const int*>(tensors[6]), static_cast<T*>(tensors[7]),
      static_cast<int*>(tensors[8]), static_cast<int*>(tensors[9]), static_cast<int*>(tensors[10]), static_cast<int*>(tensors[11]),
      static_cast<u8*>(tensors[12]), static_cast<float*>(tensors[13]), static_cast<u8*>(tensors[14]), static_cast<float*>(tensors[15]),
      static_cast<float*>(tensors[16]), dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], params[0], static_cast<kwiki_stream_t>(stream));
}
#endif  // KWIKI_DEFINE_LAUNCHER

#endif  // KWIKI_FUSED_MOE_FP8_CUH
