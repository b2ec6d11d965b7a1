// fused_moe.cuh: kwiki V0 template, fused mixture-of-experts MLP (vLLM fused_experts / HF MixtralExperts
// semantics) with deterministic routing: no float atomics anywhere, one fixed summation order.
//
//   for each token t and slot s < k with e = topk_ids[t, s] in [0, E):
//     gate = T(x[t] . w13[e, n, :]), up = T(x[t] . w13[e, I + n, :])          (n < I; rounded to T)
//     act[n] = T(T(silu(gate)) * up)                                            (the reference's roundings)
//     y[t, s, h] = act . w2[e, h, :]                                            (fp32)
//   out[t, h] = T(sum over s in slot order of topk_weights[t, s] * y[t, s, h])  (fp32, one rounding)
// A slot whose id is outside [0, E) adds nothing (HF's expert loop never visits it; vLLM's expert
// map marks remote experts -1); a token with no valid slot gives zeros.
//
// ABI (ABI.md): tensors hidden[T,H], w13[E,2I,H] (gate rows then up rows), w2[E,H,I],
// topk_weights[T,k] (fp32), topk_ids[T,k] (int32), out[T,H], then the scratch:
// chunk_counts[ceil(T*k/256)*E] (int32), expert_offsets[E+1] (int32),
// sorted_ids[T*k + E*(BM-1)] (int32), block_expert[ceil((T*k + E*(BM-1))/BM)] (int32),
// act[T*k,I] (T), slot_out[T*k,H] (fp32); dims T, H, I, E, k, BM (BM must be kBlockM, 16);
// no params. Served: T*k <= 2^26, H and I <= 2^20, E <= 4096, k <= 4096; any alignment (16-byte loads
// when H and I are multiples of 16 bytes of T and the tensors 16-byte aligned, else one element a load).
//
// Design (MegaBlocks / vLLM moe_align_block_size, made deterministic), six kernels:
// 1. count: a block per chunk of 256 (token, slot) entries; thread e counts expert e in the chunk
//    from shared memory (no atomics): chunk_counts[chunk, e].
// 2. scan (one block): per expert, the chunks' counts turned into exclusive prefixes; the experts'
//    totals padded to BM and scanned into expert_offsets; the padding of sorted_ids set to -1 and
//    block_expert (the expert of each BM-row block of sorted_ids, -1 past the end) filled.
// 3. scatter: a block per chunk again; entry j's place is its chunk's prefix for its expert plus
//    the entries of the same expert before it in the chunk: a stable sort of entries by expert.
//    The GEMM grids cover the most row blocks T*k routed entries can need; a block past the routed
//    rows (block_expert -1) leaves at once.
// 4. gate/up: a block per (BM-row block, 64 columns of I) on CUDA cores; rows gathered from hidden
//    by sorted_ids (token = entry / k); gate and up of the same 64 columns, so SiLU and the product
//    run in the epilogue; act stored by entry (row j of [T*k, I]).
// 5. down: a block per (BM-row block, 128 columns of H); rows of act gathered by sorted_ids;
//    fp32 results stored by entry into slot_out.
// 6. combine: a block per token; each column the weighted sum of its k slot rows in slot order.
// Tensor cores (CUDA, 16-bit T): the same two GEMMs on mma.sync m16n8k16 (tc:: below), written but
// not yet run on a GPU, so launched only where KWIKI_MOE_TENSOR_CORES is 1 (the serving bench turns it
// on); V0 runs the CUDA-core kernels on both platforms.
#ifndef KWIKI_FUSED_MOE_CUH
#define KWIKI_FUSED_MOE_CUH

#include <algorithm>

#include "kwiki_compat.cuh"

// The tensor-core path of the grouped GEMMs (tc:: below; CUDA, 16-bit T) has not run on a GPU yet:
// it is compiled by the serving bench and launched only where KWIKI_MOE_TENSOR_CORES is 1. V0 keeps
// the CUDA-core kernels until an H200 run checks it.
#ifndef KWIKI_MOE_TENSOR_CORES
#define KWIKI_MOE_TENSOR_CORES 0
#endif

namespace kwiki_fused_moe {

constexpr int kChunk = 256;        // (token, slot) entries of one routing block (and its threads)
constexpr int kBlockM = 16;        // rows of a grouped-GEMM block; each expert's rows padded to it
constexpr int kBlockN = 64;        // gate/up: columns of I a block computes (and the same 64 of up)
constexpr int kBlockK = 32;        // the reduction slice staged in shared memory
constexpr int kGemmThreads = 256;  // 64 columns x 4 row groups of 4 rows
constexpr int kRowsPerThread = kBlockM / (kGemmThreads / kBlockN);
constexpr int kScanThreads = 256;
constexpr int kCombineThreads = 256;
static_assert(kRowsPerThread * (kGemmThreads / kBlockN) == kBlockM, "the row groups cover the block's rows");

/// The sizes of one launch, checked by launch().
struct Shape {
  int T, H, I, E, K;
  int entries;     // T * K
  int chunks;      // ceil(entries / kChunk)
  int capacity;    // sorted_ids length: entries + E * (kBlockM - 1)
  int row_blocks;  // ceil(capacity / kBlockM)
};

/// v rounded to T and back (the reference's 16-bit intermediates); identity for float.
template <typename T>
KWIKI_DEVICE float round_through(float v) {
  return kwiki_to_float(kwiki_from_float<T>(v));
}

/// The chunk's expert ids in shared memory; ids outside [0, E) (and entries past the end) as -1.
KWIKI_DEVICE void load_chunk_ids(const int* __restrict__ topk_ids, int* ids, const Shape& s) {
  const long long j = static_cast<long long>(blockIdx.x) * kChunk + threadIdx.x;
  int e = -1;
  if (j < s.entries) {
    e = topk_ids[j];
    if (e < 0 || e >= s.E) e = -1;
  }
  ids[threadIdx.x] = e;
}

/// Element q of V elements of T packed in four 32-bit words, as fp32 (exact).
template <typename T>
KWIKI_DEVICE float word_to_float(const unsigned int (&w)[4], int q) {
  if constexpr (sizeof(T) == 4) {
    return __uint_as_float(w[q]);
  } else {
    const unsigned int word = w[q / 2];
    return kwiki_to_float(kwiki::bit_cast<T>(static_cast<unsigned short>((q & 1) ? (word >> 16) : (word & 0xffffu))));
  }
}

/// One 32-wide K slice of kRows rows into dst (fp32, zero past `len` or for a padding row): row r starts
/// at base + row_at(r) (negative: a padding row; an offset, not a pointer, so the loads stay global ones
/// on AMD rather than flat). kVec: 16-byte loads (len and every row start a multiple of the vector,
/// 16-byte aligned); else one element a load.
template <typename T, bool kVec, int kRows, typename RowAt>
KWIKI_DEVICE void load_slice(float (*dst)[kBlockK + 1], const T* __restrict__ base, RowAt row_at, int k0, int len) {
  if constexpr (kVec) {
    constexpr int V = kwiki::vec_width<T>(), kPerRow = kBlockK / V;
    for (int idx = threadIdx.x; idx < kRows * kPerRow; idx += kGemmThreads) {
      const int r = idx / kPerRow, kk = (idx % kPerRow) * V, k = k0 + kk;
      const long long at = row_at(r);
      if (at >= 0 && k < len) {
        // One 16-byte load as four words (a struct of 16-bit values may be split into narrower loads).
        const uint4 u = *reinterpret_cast<const uint4*>(base + at + k);
        const unsigned int w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int q = 0; q < V; ++q) dst[r][kk + q] = word_to_float<T>(w, q);
      } else {
#pragma unroll
        for (int q = 0; q < V; ++q) dst[r][kk + q] = 0.0f;
      }
    }
  } else {
    for (int idx = threadIdx.x; idx < kRows * kBlockK; idx += kGemmThreads) {
      const int r = idx / kBlockK, kk = idx % kBlockK, k = k0 + kk;
      const long long at = row_at(r);
      dst[r][kk] = (at >= 0 && k < len) ? kwiki_to_float(base[at + k]) : 0.0f;
    }
  }
}

/// Kernel 1: chunk_counts[chunk, e] = entries of the chunk routed to expert e.
template <typename T>
KWIKI_GLOBAL void __launch_bounds__(kChunk) moe_count_kernel(const int* __restrict__ topk_ids, int* __restrict__ chunk_counts, Shape s) {
  __shared__ int ids[kChunk];
  load_chunk_ids(topk_ids, ids, s);
  __syncthreads();
  for (int e = threadIdx.x; e < s.E; e += kChunk) {
    int c = 0;
    for (int i = 0; i < kChunk; ++i) c += ids[i] == e ? 1 : 0;
    chunk_counts[static_cast<long long>(blockIdx.x) * s.E + e] = c;
  }
}

/// Kernel 2 (one block): chunk counts to scatter bases, expert_offsets, sorted_ids padding, block_expert.
template <typename T>
KWIKI_GLOBAL void __launch_bounds__(kScanThreads)
moe_scan_kernel(int* __restrict__ chunk_counts, int* __restrict__ expert_offsets, int* __restrict__ sorted_ids, int* __restrict__ block_expert, Shape s) {
  // Per expert: exclusive prefix over the chunks, in place; the padded total into expert_offsets[e].
  for (int e = threadIdx.x; e < s.E; e += kScanThreads) {
    int run = 0;
    for (int c = 0; c < s.chunks; ++c) {
      int* slot = chunk_counts + static_cast<long long>(c) * s.E + e;
      const int n = *slot;
      *slot = run;
      run += n;
    }
    expert_offsets[e] = (run + kBlockM - 1) / kBlockM * kBlockM;
  }
  for (int r = threadIdx.x; r < s.capacity; r += kScanThreads) sorted_ids[r] = -1;  // padding rows
  __syncthreads();
  if (threadIdx.x == 0) {
    int run = 0;
    for (int e = 0; e < s.E; ++e) {
      const int n = expert_offsets[e];
      expert_offsets[e] = run;
      run += n;
    }
    expert_offsets[s.E] = run;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < s.E; e += kScanThreads) {
    const int base = expert_offsets[e];
    for (int c = 0; c < s.chunks; ++c) chunk_counts[static_cast<long long>(c) * s.E + e] += base;
  }
  const int total = expert_offsets[s.E];
  for (int b = threadIdx.x; b < s.row_blocks; b += kScanThreads) {
    const int row = b * kBlockM;
    int e = -1;
    if (row < total) {  // the last expert whose range starts at or before row (empty experts start there too)
      int lo = 0, hi = s.E;  // invariant: expert_offsets[lo] <= row < expert_offsets[hi]
      while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (expert_offsets[mid] <= row) lo = mid;
        else hi = mid;
      }
      e = lo;
    }
    block_expert[b] = e;
  }
}

/// Kernel 3: each entry to its place in sorted_ids (stable: the chunk's earlier entries of its expert first).
template <typename T>
KWIKI_GLOBAL void __launch_bounds__(kChunk)
moe_scatter_kernel(const int* __restrict__ topk_ids, const int* __restrict__ chunk_counts, int* __restrict__ sorted_ids, Shape s) {
  __shared__ int ids[kChunk];
  load_chunk_ids(topk_ids, ids, s);
  __syncthreads();
  const int e = ids[threadIdx.x];
  if (e < 0) return;
  int rank = 0;
  for (int i = 0; i < static_cast<int>(threadIdx.x); ++i) rank += ids[i] == e ? 1 : 0;
  const int place = chunk_counts[static_cast<long long>(blockIdx.x) * s.E + e] + rank;
  sorted_ids[place] = static_cast<int>(static_cast<long long>(blockIdx.x) * kChunk + threadIdx.x);
}

/// The CUDA-core inner product of kernels 4 and 5: over K, slices of kBlockK staged in xs (the block's
/// BM rows of x, by x_row) and ws (its 2 x 64 rows of w, by w_row; -1: a zero row); acc0[r] and acc1[r]
/// take row r0 + r against w rows c and 64 + c. Ends with the block past its last barrier.
template <typename T, bool kVec, typename XRow, typename WRow>
KWIKI_DEVICE void dot_rows_2x(float (&xs)[kBlockM][kBlockK + 1], float (&ws)[2 * kBlockN][kBlockK + 1], const T* x, XRow x_row, const T* w,
                              WRow w_row, int K, int c, int r0, float (&acc0)[kRowsPerThread], float (&acc1)[kRowsPerThread]) {
  for (int k0 = 0; k0 < K; k0 += kBlockK) {
    load_slice<T, kVec, kBlockM>(xs, x, x_row, k0, K);
    load_slice<T, kVec, 2 * kBlockN>(ws, w, w_row, k0, K);
    __syncthreads();
#pragma unroll 4
    for (int kk = 0; kk < kBlockK; ++kk) {
      const float w0 = ws[c][kk], w1 = ws[kBlockN + c][kk];
#pragma unroll
      for (int r = 0; r < kRowsPerThread; ++r) {
        const float xv = xs[r0 + r][kk];
        acc0[r] += xv * w0;
        acc1[r] += xv * w1;
      }
    }
    __syncthreads();
  }
}

/// Kernel 4: act[j, n] = T(T(silu(gate)) * up) for the block's BM sorted rows and 64 columns n.
template <typename T, bool kVec>
KWIKI_GLOBAL void __launch_bounds__(kGemmThreads)
moe_gate_up_kernel(const T* __restrict__ hidden, const T* __restrict__ w13, const int* __restrict__ sorted_ids,
                   const int* __restrict__ block_expert, T* __restrict__ act, Shape s) {
  __shared__ int rows[kBlockM];
  __shared__ float xs[kBlockM][kBlockK + 1];
  __shared__ float ws[2 * kBlockN][kBlockK + 1];  // gate rows, then the up rows of the same columns
  const int col_blocks = (s.I + kBlockN - 1) / kBlockN;
  const int mb = static_cast<int>(blockIdx.x / col_blocks), n0 = static_cast<int>(blockIdx.x % col_blocks) * kBlockN;
  const int e = block_expert[mb];
  if (e < 0) return;  // past the routed rows: the whole block leaves before any barrier
  const int tid = threadIdx.x, c = tid % kBlockN, r0 = (tid / kBlockN) * kRowsPerThread;
  if (tid < kBlockM) rows[tid] = sorted_ids[mb * kBlockM + tid];
  __syncthreads();
  float gate[kRowsPerThread] = {}, up[kRowsPerThread] = {};
  const T* w = w13 + static_cast<size_t>(e) * 2 * s.I * s.H;
  // A row of hidden per sorted row (its token), and the gate rows n0.. then the up rows I + n0.. of w13[e].
  auto x_row = [&](int r) -> long long {
    const int j = rows[r];
    return j >= 0 ? static_cast<long long>(j / s.K) * s.H : -1;
  };
  auto w_row = [&](int q) -> long long {
    const int n = n0 + q % kBlockN;
    return n < s.I ? static_cast<long long>(q < kBlockN ? n : s.I + n) * s.H : -1;
  };
  dot_rows_2x<T, kVec>(xs, ws, hidden, x_row, w, w_row, s.H, c, r0, gate, up);
  const int n = n0 + c;
  if (n >= s.I) return;
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) {
    const int j = rows[r0 + r];
    if (j < 0) continue;
    const float g = round_through<T>(gate[r]), u = round_through<T>(up[r]);
    const float silu = round_through<T>(g / (1.0f + expf(-g)));
    act[static_cast<size_t>(j) * s.I + n] = kwiki_from_float<T>(silu * u);
  }
}

/// Kernel 5: slot_out[j, h] = act[j] . w2[e, h] (fp32) for the block's BM sorted rows and 128 columns h.
template <typename T, bool kVec>
KWIKI_GLOBAL void __launch_bounds__(kGemmThreads)
moe_down_kernel(const T* __restrict__ act, const T* __restrict__ w2, const int* __restrict__ sorted_ids, const int* __restrict__ block_expert,
                float* __restrict__ slot_out, Shape s) {
  __shared__ int rows[kBlockM];
  __shared__ float xs[kBlockM][kBlockK + 1];
  __shared__ float ws[2 * kBlockN][kBlockK + 1];  // 128 rows of w2 (columns of the output)
  constexpr int kCols = 2 * kBlockN;
  const int col_blocks = (s.H + kCols - 1) / kCols;
  const int mb = static_cast<int>(blockIdx.x / col_blocks), h0 = static_cast<int>(blockIdx.x % col_blocks) * kCols;
  const int e = block_expert[mb];
  if (e < 0) return;
  const int tid = threadIdx.x, c = tid % kBlockN, r0 = (tid / kBlockN) * kRowsPerThread;
  if (tid < kBlockM) rows[tid] = sorted_ids[mb * kBlockM + tid];
  __syncthreads();
  float lo[kRowsPerThread] = {}, hi[kRowsPerThread] = {};  // columns h0 + c and h0 + 64 + c
  const T* w = w2 + static_cast<size_t>(e) * s.H * s.I;
  auto a_row = [&](int r) -> long long {
    const int j = rows[r];
    return j >= 0 ? static_cast<long long>(j) * s.I : -1;
  };
  auto w_row = [&](int q) -> long long { return h0 + q < s.H ? static_cast<long long>(h0 + q) * s.I : -1; };
  dot_rows_2x<T, kVec>(xs, ws, act, a_row, w, w_row, s.I, c, r0, lo, hi);
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) {
    const int j = rows[r0 + r];
    if (j < 0) continue;
    float* o = slot_out + static_cast<size_t>(j) * s.H;
    if (h0 + c < s.H) o[h0 + c] = lo[r];
    if (h0 + kBlockN + c < s.H) o[h0 + kBlockN + c] = hi[r];
  }
}

/// Kernel 6: out[t, h] = T(sum over slots in order of weight * slot_out), a block per token.
template <typename T>
KWIKI_GLOBAL void __launch_bounds__(kCombineThreads)
moe_combine_kernel(const float* __restrict__ topk_weights, const int* __restrict__ topk_ids, const float* __restrict__ slot_out, T* __restrict__ out,
                   Shape s) {
  const long long t = blockIdx.x;
  for (int h = threadIdx.x; h < s.H; h += kCombineThreads) {
    float sum = 0.0f;
    for (int k = 0; k < s.K; ++k) {
      const long long j = t * s.K + k;
      const int e = topk_ids[j];
      if (e < 0 || e >= s.E) continue;
      sum += topk_weights[j] * slot_out[static_cast<size_t>(j) * s.H + h];
    }
    out[static_cast<size_t>(t) * s.H + h] = kwiki_from_float<T>(sum);
  }
}

#if KWIKI_PLATFORM_CUDA && KWIKI_MOE_TENSOR_CORES
// ---------------------------------------------------------------------------------------------
// Tensor cores (CUDA sm_80+, 16-bit T): the same tiles (16 sorted rows; 64 columns of gate and of up,
// or 128 columns of H) and K slices, staged in shared memory as T, 4 warps a block, each warp's
// columns as n-tiles of 8 on mma.sync m16n8k16 (fp32 accumulate). Fragments are read from shared
// memory as 32-bit pairs in the instruction's documented layout (PTX ISA, "Matrix Fragments for
// mma.m16n8k16"): lane = 4 g + q; A regs: (row g, k 2q..2q+1), (row g + 8, k 2q..), (row g,
// k 8 + 2q..), (row g + 8, k 8 + 2q..); B regs: (column g, k 2q..2q+1), (column g, k 8 + 2q..);
// C: (row g, columns 2q, 2q + 1), (row g + 8, the same columns). Epilogues as the CUDA-core kernels.
namespace tc {

constexpr int kThreads = 128;
constexpr int kLd = kBlockK + 8;  // 40 elements (80 bytes) a staged row: the 8 rows of a fragment load fall on distinct banks

/// The 32-bit pair of T at p (shared memory, 4-byte aligned).
template <typename T>
__device__ __forceinline__ unsigned pair_at(const T* p) {
  return *reinterpret_cast<const unsigned*>(p);
}

/// One 32-wide K slice of kRows rows staged as T (zeros past len and for padding rows).
template <typename T, bool kVec, int kRows, typename RowAt>
__device__ __forceinline__ void stage(T (*dst)[kLd], const T* __restrict__ base, RowAt row_at, int k0, int len) {
  if constexpr (kVec) {
    constexpr int V = kwiki::vec_width<T>(), kPerRow = kBlockK / V;
    for (int idx = threadIdx.x; idx < kRows * kPerRow; idx += kThreads) {
      const int r = idx / kPerRow, kk = (idx % kPerRow) * V, k = k0 + kk;
      const long long at = row_at(r);
      const uint4 u = (at >= 0 && k < len) ? *reinterpret_cast<const uint4*>(base + at + k) : make_uint4(0u, 0u, 0u, 0u);
      *reinterpret_cast<uint4*>(&dst[r][kk]) = u;
    }
  } else {
    for (int idx = threadIdx.x; idx < kRows * kBlockK; idx += kThreads) {
      const int r = idx / kBlockK, kk = idx % kBlockK, k = k0 + kk;
      const long long at = row_at(r);
      dst[r][kk] = (at >= 0 && k < len) ? base[at + k] : kwiki_from_float<T>(0.0f);
    }
  }
}

/// The A fragment of k-step ks from the 16 staged rows.
template <typename T>
__device__ __forceinline__ void load_a(unsigned (&a)[4], const T (*xs)[kLd], int ks, int g, int q) {
  a[0] = pair_at(&xs[g][ks + 2 * q]);
  a[1] = pair_at(&xs[g + 8][ks + 2 * q]);
  a[2] = pair_at(&xs[g][ks + 8 + 2 * q]);
  a[3] = pair_at(&xs[g + 8][ks + 8 + 2 * q]);
}

/// gate/up on tensor cores: warp w owns columns n0 + 16w .. + 15 of gate (n-tiles 0, 1) and of up (2, 3).
template <typename T, bool kVec>
KWIKI_GLOBAL void __launch_bounds__(kThreads)
moe_gate_up_tc_kernel(const T* __restrict__ hidden, const T* __restrict__ w13, const int* __restrict__ sorted_ids,
                      const int* __restrict__ block_expert, T* __restrict__ act, Shape s) {
  __shared__ int rows[kBlockM];
  __shared__ __align__(16) T xs[kBlockM][kLd];
  __shared__ __align__(16) T ws[2 * kBlockN][kLd];
  const int col_blocks = (s.I + kBlockN - 1) / kBlockN;
  const int mb = static_cast<int>(blockIdx.x / col_blocks), n0 = static_cast<int>(blockIdx.x % col_blocks) * kBlockN;
  const int e = block_expert[mb];
  if (e < 0) return;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, q = lane % 4;
  if (threadIdx.x < kBlockM) rows[threadIdx.x] = sorted_ids[mb * kBlockM + threadIdx.x];
  __syncthreads();
  const T* w = w13 + static_cast<size_t>(e) * 2 * s.I * s.H;
  auto x_row = [&](int r) -> long long {
    const int j = rows[r];
    return j >= 0 ? static_cast<long long>(j / s.K) * s.H : -1;
  };
  auto w_row = [&](int r) -> long long {
    const int n = n0 + r % kBlockN;
    return n < s.I ? static_cast<long long>(r < kBlockN ? n : s.I + n) * s.H : -1;
  };
  float acc[4][4] = {};
  for (int k0 = 0; k0 < s.H; k0 += kBlockK) {
    stage<T, kVec, kBlockM>(xs, hidden, x_row, k0, s.H);
    stage<T, kVec, 2 * kBlockN>(ws, w, w_row, k0, s.H);
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < kBlockK; ks += 16) {
      unsigned a[4];
      load_a(a, xs, ks, g, q);
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const int nb = (t < 2 ? 0 : kBlockN) + 16 * warp + 8 * (t % 2);
        kwiki::mma16816<T>(acc[t], a, pair_at(&ws[nb + g][ks + 2 * q]), pair_at(&ws[nb + g][ks + 8 + 2 * q]));
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int t = 0; t < 2; ++t) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = g + 8 * (i / 2), n = n0 + 16 * warp + 8 * t + 2 * q + i % 2, j = rows[r];
      if (j < 0 || n >= s.I) continue;
      const float gr = round_through<T>(acc[t][i]), ur = round_through<T>(acc[t + 2][i]);
      const float silu = round_through<T>(gr / (1.0f + expf(-gr)));
      act[static_cast<size_t>(j) * s.I + n] = kwiki_from_float<T>(silu * ur);
    }
  }
}

/// down on tensor cores: warp w owns columns h0 + 32w .. + 31 (four n-tiles).
template <typename T, bool kVec>
KWIKI_GLOBAL void __launch_bounds__(kThreads)
moe_down_tc_kernel(const T* __restrict__ act, const T* __restrict__ w2, const int* __restrict__ sorted_ids, const int* __restrict__ block_expert,
                   float* __restrict__ slot_out, Shape s) {
  constexpr int kCols = 2 * kBlockN;
  __shared__ int rows[kBlockM];
  __shared__ __align__(16) T xs[kBlockM][kLd];
  __shared__ __align__(16) T ws[kCols][kLd];
  const int col_blocks = (s.H + kCols - 1) / kCols;
  const int mb = static_cast<int>(blockIdx.x / col_blocks), h0 = static_cast<int>(blockIdx.x % col_blocks) * kCols;
  const int e = block_expert[mb];
  if (e < 0) return;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, q = lane % 4;
  if (threadIdx.x < kBlockM) rows[threadIdx.x] = sorted_ids[mb * kBlockM + threadIdx.x];
  __syncthreads();
  const T* w = w2 + static_cast<size_t>(e) * s.H * s.I;
  auto a_row = [&](int r) -> long long {
    const int j = rows[r];
    return j >= 0 ? static_cast<long long>(j) * s.I : -1;
  };
  auto w_row = [&](int r) -> long long { return h0 + r < s.H ? static_cast<long long>(h0 + r) * s.I : -1; };
  float acc[4][4] = {};
  for (int k0 = 0; k0 < s.I; k0 += kBlockK) {
    stage<T, kVec, kBlockM>(xs, act, a_row, k0, s.I);
    stage<T, kVec, kCols>(ws, w, w_row, k0, s.I);
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < kBlockK; ks += 16) {
      unsigned a[4];
      load_a(a, xs, ks, g, q);
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const int nb = 32 * warp + 8 * t;
        kwiki::mma16816<T>(acc[t], a, pair_at(&ws[nb + g][ks + 2 * q]), pair_at(&ws[nb + g][ks + 8 + 2 * q]));
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int t = 0; t < 4; ++t) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = g + 8 * (i / 2), h = h0 + 32 * warp + 8 * t + 2 * q + i % 2, j = rows[r];
      if (j >= 0 && h < s.H) slot_out[static_cast<size_t>(j) * s.H + h] = acc[t][i];
    }
  }
}

}  // namespace tc
#endif  // KWIKI_PLATFORM_CUDA && KWIKI_MOE_TENSOR_CORES

/// The sizes launch() serves, or false (see the header comment).
inline bool make_shape(long long T, long long H, long long I, long long E, long long K, long long BM, Shape* s) {
  if (T < 0 || H < 1 || I < 1 || E < 1 || K < 1 || BM != kBlockM) return false;
  if (H > (1ll << 20) || I > (1ll << 20) || E > 4096 || K > 4096 || T * K > (1ll << 26)) return false;
  s->T = static_cast<int>(T);
  s->H = static_cast<int>(H);
  s->I = static_cast<int>(I);
  s->E = static_cast<int>(E);
  s->K = static_cast<int>(K);
  s->entries = static_cast<int>(T * K);
  s->chunks = static_cast<int>((T * K + kChunk - 1) / kChunk);
  s->capacity = static_cast<int>(T * K + E * (kBlockM - 1));
  s->row_blocks = (s->capacity + kBlockM - 1) / kBlockM;
  // The GEMM grids are one dimension: row blocks times column blocks must fit in 2^31 - 1.
  const long long cols = std::max((I + kBlockN - 1) / kBlockN, (H + 2 * kBlockN - 1) / (2 * kBlockN));
  return static_cast<long long>(s->row_blocks) * cols <= 0x7fffffffll;
}

/// Enqueues the six kernels on `stream`; 0, the first launch error, or -1 for sizes or pointers it
/// cannot serve. Never synchronizes.
template <typename T>
inline int launch(const T* hidden, const T* w13, const T* w2, const float* topk_weights, const int* topk_ids, T* out, int* chunk_counts,
                  int* expert_offsets, int* sorted_ids, int* block_expert, T* act, float* slot_out, long long T_, long long H, long long I,
                  long long E, long long K, long long BM, kwiki_stream_t stream) {
  Shape s;
  if (!make_shape(T_, H, I, E, K, BM, &s)) return -1;
  if (T_ == 0) return 0;
  if (!hidden || !w13 || !w2 || !topk_weights || !topk_ids || !out || !chunk_counts || !expert_offsets || !sorted_ids || !block_expert || !act ||
      !slot_out)
    return -1;
  int err = 0;
  moe_count_kernel<T><<<dim3(static_cast<unsigned>(s.chunks)), dim3(kChunk), 0, stream>>>(topk_ids, chunk_counts, s);
  if ((err = kwiki_last_error()) != 0) return err;
  moe_scan_kernel<T><<<dim3(1), dim3(kScanThreads), 0, stream>>>(chunk_counts, expert_offsets, sorted_ids, block_expert, s);
  if ((err = kwiki_last_error()) != 0) return err;
  moe_scatter_kernel<T><<<dim3(static_cast<unsigned>(s.chunks)), dim3(kChunk), 0, stream>>>(topk_ids, chunk_counts, sorted_ids, s);
  if ((err = kwiki_last_error()) != 0) return err;
  // 16-byte loads when every row the GEMMs read starts on a 16-byte boundary.
  constexpr int V = kwiki::vec_width<T>();
  const bool vec = s.H % V == 0 && s.I % V == 0 && kwiki::aligned16(hidden) && kwiki::aligned16(w13) && kwiki::aligned16(w2) && kwiki::aligned16(act);
  const dim3 up_grid(static_cast<unsigned>(static_cast<long long>(s.row_blocks) * ((s.I + kBlockN - 1) / kBlockN)));
  const dim3 down_grid(static_cast<unsigned>(static_cast<long long>(s.row_blocks) * ((s.H + 2 * kBlockN - 1) / (2 * kBlockN))));
#if KWIKI_PLATFORM_CUDA && KWIKI_MOE_TENSOR_CORES
  if constexpr (sizeof(T) == 2) {
    if (vec) tc::moe_gate_up_tc_kernel<T, true><<<up_grid, dim3(tc::kThreads), 0, stream>>>(hidden, w13, sorted_ids, block_expert, act, s);
    else tc::moe_gate_up_tc_kernel<T, false><<<up_grid, dim3(tc::kThreads), 0, stream>>>(hidden, w13, sorted_ids, block_expert, act, s);
    if ((err = kwiki_last_error()) != 0) return err;
    if (vec) tc::moe_down_tc_kernel<T, true><<<down_grid, dim3(tc::kThreads), 0, stream>>>(act, w2, sorted_ids, block_expert, slot_out, s);
    else tc::moe_down_tc_kernel<T, false><<<down_grid, dim3(tc::kThreads), 0, stream>>>(act, w2, sorted_ids, block_expert, slot_out, s);
    if ((err = kwiki_last_error()) != 0) return err;
    moe_combine_kernel<T><<<dim3(static_cast<unsigned>(s.T)), dim3(kCombineThreads), 0, stream>>>(topk_weights, topk_ids, slot_out, out, s);
    return kwiki_last_error();
  }
#endif
  if (vec) moe_gate_up_kernel<T, true><<<up_grid, dim3(kGemmThreads), 0, stream>>>(hidden, w13, sorted_ids, block_expert, act, s);
  else moe_gate_up_kernel<T, false><<<up_grid, dim3(kGemmThreads), 0, stream>>>(hidden, w13, sorted_ids, block_expert, act, s);
  if ((err = kwiki_last_error()) != 0) return err;
  if (vec) moe_down_kernel<T, true><<<down_grid, dim3(kGemmThreads), 0, stream>>>(act, w2, sorted_ids, block_expert, slot_out, s);
  else moe_down_kernel<T, false><<<down_grid, dim3(kGemmThreads), 0, stream>>>(act, w2, sorted_ids, block_expert, slot_out, s);
  if ((err = kwiki_last_error()) != 0) return err;
  moe_combine_kernel<T><<<dim3(static_cast<unsigned>(s.T)), dim3(kCombineThreads), 0, stream>>>(topk_weights, topk_ids, slot_out, out, s);
  return kwiki_last_error();
}

}  // namespace kwiki_fused_moe

#ifdef KWIKI_DEFINE_LAUNCHER
KWIKI_EXPORT int kwiki_abi_version(void) { return 1; }

KWIKI_EXPORT int kwiki_launch(void* const* tensors, int num_tensors, const long long* dims, int num_dims, const double* params, int num_params,
                              void* stream) {
  (void)params;
  (void)num_params;
  if (tensors == nullptr || dims == nullptr || num_tensors != 12 || num_dims != 6) return -1;
  typedef KWIKI_T T;
  return kwiki_fused_moe::launch<T>(static_cast<const T*>(tensors[0]), static_cast<const T*>(tensors[1]), static_cast<const T*>(tensors[2]),
                                    static_cast<const float*>(tensors[3]), static_cast<const int*>(tensors[4]), static_cast<T*>(tensors[5]),
                                    static_cast<int*>(tensors[6]), static_cast<int*>(tensors[7]), static_cast<int*>(tensors[8]),
                                    static_cast<int*>(tensors[9]), static_cast<T*>(tensors[10]), static_cast<float*>(tensors[11]), dims[0], dims[1],
                                    dims[2], dims[3], dims[4], dims[5], static_cast<kwiki_stream_t>(stream));
}
#endif  // KWIKI_DEFINE_LAUNCHER

#endif  // KWIKI_FUSED_MOE_CUH
