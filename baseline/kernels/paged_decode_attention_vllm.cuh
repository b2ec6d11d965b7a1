// paged_decode_attention_vllm.cuh: kwiki V0 template, paged decode attention in vLLM's cache
// layout with split-KV and GQA (vLLM paged_attention_v2 semantics).
//
//   out[b, h, :] = softmax_t(scale * q[b, h] . k_t) v_t over the seq_lens[b] cached tokens of
//   sequence b; token t is in page block_tables[b, t / P], slot t % P; query head h reads KV
//   head h / (Hq / Hkv). key_cache [NB, Hkv, D/X, P, X] (X = 16 bytes of elements), value_cache
//   [NB, Hkv, D, P]. A sequence of length 0 gives zeros.
//
// ABI (ABI.md): tensors query[B,Hq,D], key_cache, value_cache, block_tables[B,MB] (int32),
// seq_lens[B] (int32), out[B,Hq,D], partial_out[B,Hq,S,D] (fp32), partial_lse[B,Hq,S] (fp32);
// dims B, Hq, Hkv, D, P, MB, S, X, NB; params scale. Served: X = 16 bytes of KWIKI_T, P a power
// of two, Hq / Hkv <= 16, D <= 2 x the block's threads, a split of at most 512 tokens (S >=
// ceil(MB * P / 512)). A page id outside [0, NB) masks its tokens (the CPU twin refuses it).
//
// Design, two kernels; launch() takes the first that applies (the first only where
// KWIKI_DECODE_TENSOR_CORES is 1: see below the includes).
// 1. Tensor cores (tc::paged_vllm_tc_kernel; CUDA builds for sm_80+, T bf16 or fp16, D 64 or 128,
//    Hq / Hkv <= 8, P a multiple of 16): the vLLM-layout form of paged_decode_attention.cuh's
//    pda_mma_kernel (the flash layout's, 499-511 us at B32 ctx16384 on the H200, about the copy
//    rate: bench/results/decode_kernel_bench-h200.txt): a block per (split, KV head, sequence) holds the GQA group's query heads as mma
//    rows; its 4 warps stream 16-token chunks of K and V through shared memory by cp.async (the
//    caches' contiguous runs copied as they lie: 256 bytes of K's x groups, 32 bytes of a V row)
//    and run both products on mma.sync (see its comment below). The launcher chooses how many of
//    the caller's S splits it uses (choose_tc_splits: the least modeled time in waves of resident
//    blocks, the fewest splits among equals). Before it, at session 12 on the H200, the CUDA-core
//    kernel below moved 13-56% of the copy bandwidth (bench/results/serving_kernels_h200-
//    session12.txt); by its structure (each warp's loads of a slice, then each thread's walk over
//    its V rows page by page, with little in flight) latency-bound (not profiled).
// 2. CUDA cores (paged_decode_vllm_kernel; HIP, fp32 and every other shape): grid (S, Hkv, B), 4
//    warps a block; each block serves every query head of its GQA group, so each K/V element is
//    read once. Scores: a warp takes one page slice of min(P, warp) tokens at a time; lanes over
//    the slice's tokens, then over the D/X 16-byte groups (a load instruction reads whole
//    X-groups of consecutive tokens: coalesced); each lane's partial dot products with the
//    group's queries (fp32, in shared memory) are summed over the lanes of its token with a
//    butterfly. The split's scores stay in shared memory; one warp per query head takes their
//    max and the sum of exponentials. Values: thread i owns rows d = i, i + threads of [D, P] and
//    reads a page's P tokens of a row as 16-byte chunks (consecutive threads read consecutive
//    rows).
// With one split a block writes out; otherwise fp32 partials and their log-sum-exp, merged by a
// second kernel.
#ifndef KWIKI_PAGED_DECODE_ATTENTION_VLLM_CUH
#define KWIKI_PAGED_DECODE_ATTENTION_VLLM_CUH

#include <algorithm>

#include "kwiki_compat.cuh"

// The tensor-core path (tc:: below) is V0's on CUDA: it passed every serving-bench shape on the H200
// in session 14 (bench/results/serving_kernels_h200-session14-tc.txt) at 1.5-5x the CUDA-core
// kernel's speed. -DKWIKI_DECODE_TENSOR_CORES=0 builds the CUDA-core kernel instead.
#ifndef KWIKI_DECODE_TENSOR_CORES
#define KWIKI_DECODE_TENSOR_CORES 1
#endif

namespace kwiki_paged_decode_vllm {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * KWIKI_WARP_SIZE;
constexpr int kMaxPartition = 512;       // tokens of one split (their scores live in shared memory)
constexpr int kMaxSharedBytes = 48 * 1024;

/// The sizes of one launch, checked by launch().
struct Shape {
  int B, Hq, Hkv, D, P, MB, S, part;  // part: tokens of one split, a multiple of P
  long long NB;
  float scale;
};

/// One (split, KV head, sequence) block. NG >= the GQA group size; ND x kThreads >= D.
template <typename T, int NG, int ND>
KWIKI_GLOBAL void __launch_bounds__(kThreads, 1)
paged_decode_vllm_kernel(const T* __restrict__ query, const T* __restrict__ key_cache, const T* __restrict__ value_cache,
                         const int* __restrict__ block_tables, const int* __restrict__ seq_lens, T* __restrict__ out,
                         float* __restrict__ partial_out, float* __restrict__ partial_lse, Shape s) {
  constexpr int X = kwiki::vec_width<T>();
  extern __shared__ float smem[];
  float* q_s = smem;                    // [NG][D] fp32
  float* scores = q_s + NG * s.D;       // [NG][part]
  float* stats = scores + NG * s.part;  // [NG] max, [NG] sum
  const int split = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
  const int G = s.Hq / s.Hkv;
  const int warp = threadIdx.x / KWIKI_WARP_SIZE, lane = threadIdx.x % KWIKI_WARP_SIZE;
  const int len = min(max(seq_lens[b], 0), s.MB * s.P);
  const int start = split * s.part;
  const int end = min(start + s.part, len);
  const long long head0 = static_cast<long long>(b) * s.Hq + static_cast<long long>(kvh) * G;  // first query head of the group

  if (start >= end) {  // an empty split (or an empty sequence): no weight in the merge
    for (int i = threadIdx.x; i < G * s.D; i += blockDim.x) {
      const long long h = head0 + i / s.D;
      const int d = i % s.D;
      if (s.S == 1) out[h * s.D + d] = kwiki_from_float<T>(0.f);
      else partial_out[(h * s.S + split) * s.D + d] = 0.f;
    }
    if (s.S > 1)
      for (int g = threadIdx.x; g < G; g += blockDim.x) partial_lse[(head0 + g) * s.S + split] = -INFINITY;
    return;
  }

  for (int i = threadIdx.x; i < NG * s.D; i += blockDim.x) {
    const int g = i / s.D;
    q_s[i] = g < G ? kwiki_to_float(query[(head0 + g) * s.D + i % s.D]) : 0.f;
  }
  __syncthreads();

  // Scores: a warp per page slice of TW tokens, LT lanes per token over the D/X groups.
  const int TW = s.P < KWIKI_WARP_SIZE ? s.P : KWIKI_WARP_SIZE;
  const int LT = KWIKI_WARP_SIZE / TW;
  const int tok = lane % TW, part = lane / TW;
  const int groups = s.D / X;
  const int slices_per_page = s.P / TW;
  const int first_page = start / s.P, last_page = (end - 1) / s.P;
  const int num_slices = (last_page - first_page + 1) * slices_per_page;
  for (int sl = warp; sl < num_slices; sl += kWarps) {
    const int page_i = first_page + sl / slices_per_page;
    const int t = page_i * s.P + (sl % slices_per_page) * TW + tok;  // token of this lane
    const int page = block_tables[static_cast<long long>(b) * s.MB + page_i];
    const bool valid = t < end && page >= 0 && page < s.NB;
    float acc[NG];
#pragma unroll
    for (int g = 0; g < NG; ++g) acc[g] = 0.f;
    if (valid) {
      const T* k = key_cache + ((static_cast<long long>(page) * s.Hkv + kvh) * groups * s.P + t % s.P) * X;
      for (int c = part; c < groups; c += LT) {
        float kv[X];
        kwiki::load_f32<X>(k + static_cast<long long>(c) * s.P * X, kv);
#pragma unroll
        for (int g = 0; g < NG; ++g) {
          if (g < G) {
            const float* qg = q_s + g * s.D + c * X;
#pragma unroll
            for (int j = 0; j < X; ++j) acc[g] = fmaf(qg[j], kv[j], acc[g]);
          }
        }
      }
    }
    for (int o = TW; o < KWIKI_WARP_SIZE; o <<= 1)
#pragma unroll
      for (int g = 0; g < NG; ++g) acc[g] += kwiki_shfl_xor(acc[g], o);
    if (part == 0 && t >= start && t < start + s.part) {
#pragma unroll
      for (int g = 0; g < NG; ++g)
        if (g < G) scores[g * s.part + (t - start)] = (valid ? acc[g] * s.scale : -INFINITY);
    }
  }
  __syncthreads();

  // Softmax statistics per query head: a warp per head; scores become exp(score - max).
  const int n = end - start;
  for (int g = warp; g < G; g += kWarps) {
    float* sc = scores + g * s.part;
    float m = -INFINITY;
    for (int i = lane; i < n; i += KWIKI_WARP_SIZE) m = fmaxf(m, sc[i]);
    m = kwiki::warp_reduce_max(m);
    float sum = 0.f;
    for (int i = lane; i < n; i += KWIKI_WARP_SIZE) {
      const float e = m == -INFINITY ? 0.f : expf(sc[i] - m);
      sc[i] = e;
      sum += e;
    }
    sum = kwiki::warp_reduce_sum(sum);
    if (lane == 0) {
      stats[g] = m;
      stats[NG + g] = sum;
    }
  }
  __syncthreads();

  // Values: thread i owns rows d = i + r * kThreads; a page's P tokens of a row are contiguous.
  float o[ND][NG];
#pragma unroll
  for (int r = 0; r < ND; ++r)
#pragma unroll
    for (int g = 0; g < NG; ++g) o[r][g] = 0.f;
  for (int page_i = first_page; page_i <= last_page; ++page_i) {
    const int page = block_tables[static_cast<long long>(b) * s.MB + page_i];
    if (page < 0 || page >= s.NB) continue;  // masked: its scores are exp(-inf) = 0
    const int t0 = page_i * s.P;
#pragma unroll
    for (int r = 0; r < ND; ++r) {
      const int d = threadIdx.x + r * kThreads;
      if (d >= s.D) continue;
      const T* v = value_cache + ((static_cast<long long>(page) * s.Hkv + kvh) * s.D + d) * s.P;
      for (int c = 0; c < s.P; c += X) {
        float vv[X];
        kwiki::load_f32<X>(v + c, vv);  // X divides P (both powers of two, P >= X checked)
#pragma unroll
        for (int j = 0; j < X; ++j) {
          const int t = t0 + c + j;
          if (t < start || t >= end) continue;
#pragma unroll
          for (int g = 0; g < NG; ++g)
            if (g < G) o[r][g] = fmaf(scores[g * s.part + (t - start)], vv[j], o[r][g]);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < ND; ++r) {
    const int d = threadIdx.x + r * kThreads;
    if (d >= s.D) continue;
#pragma unroll
    for (int g = 0; g < NG; ++g) {
      if (g >= G) continue;
      const float sum = stats[NG + g];
      const float val = o[r][g] * (sum > 0.f ? 1.f / sum : 0.f);
      const long long h = head0 + g;
      if (s.S == 1) out[h * s.D + d] = kwiki_from_float<T>(val);
      else partial_out[(h * s.S + split) * s.D + d] = val;
    }
  }
  if (s.S > 1 && threadIdx.x < G) {
    const int g = threadIdx.x;
    const float sum = stats[NG + g];
    partial_lse[(head0 + g) * s.S + split] = sum > 0.f ? stats[g] + logf(sum) : -INFINITY;
  }
}

/// out[b, h, :] = sum_s exp(lse_s - LSE) partial_out_s over the first `used` splits of the S a
/// row of the partials holds; grid (Hq, B).
template <typename T>
KWIKI_GLOBAL void __launch_bounds__(kThreads, 1)
merge_kernel(const float* __restrict__ partial_out, const float* __restrict__ partial_lse, T* __restrict__ out, int D, int S, int used) {
  const long long h = static_cast<long long>(blockIdx.y) * gridDim.x + blockIdx.x;
  const float* lse = partial_lse + h * S;
  float m = -INFINITY;
  for (int i = 0; i < used; ++i) m = fmaxf(m, lse[i]);
  float total = 0.f;
  for (int i = 0; i < used; ++i) total += m == -INFINITY ? 0.f : expf(lse[i] - m);
  const float inv_total = total > 0.f ? 1.f / total : 0.f;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float acc = 0.f;
    for (int i = 0; i < used; ++i)
      if (lse[i] != -INFINITY) acc += expf(lse[i] - m) * partial_out[(h * S + i) * D + d];
    out[h * D + d] = kwiki_from_float<T>(acc * inv_total);
  }
}

// =============================================================================================
// Tensor-core path (CUDA, sm_80+; T bf16 or fp16, D 64 or 128, G = Hq / Hkv <= 8, P a multiple
// of 16), the vLLM-layout form of paged_decode_attention.cuh's pda_mma_kernel: grid (splits, Hkv,
// B), 4 warps a block, every query head of the GQA group in the block (rows 0..G-1 of the mma
// tiles), so each K/V byte is read once. The split's 16-token chunks (one page slice each) go to
// the warps in turn (chunk c to warp c % 4); each warp streams its chunks through its own ring of
// NST shared-memory stages by cp.async, NST - 1 chunks in flight. A chunk is 2 x D x 16 x 2 bytes,
// copied as the layout lays it out: K as D / 8 runs of 16 tokens x 16 bytes (the layout's x
// groups: 256 contiguous bytes a run), V as D rows of 16 tokens (32 contiguous bytes a row; the
// whole page's 4 KB when P = 16); tokens past the split, and a page id outside [0, NB), are
// zero-filled and their scores masked. S = Q K^T by mma.sync m16n8k16 (B = K through ldmatrix:
// a run's rows are tokens, its 16 bytes 8 consecutive dims); online softmax in fp32 (log2
// domain); O += P V by mma.sync with B through plain ldmatrix (a V row's 16 bytes are 8
// consecutive tokens of one dim: the B fragment as mma wants it; rows placed with a 16-byte XOR
// swizzle so the reads are conflict-free). P enters the second product as hi = T(p) plus lo =
// T(p - hi), as in pda_mma_kernel. The launcher picks the splits it uses (at most S) from the
// occupancy, and merge_kernel combines them.
// =============================================================================================
#if KWIKI_PLATFORM_CUDA
namespace tc {

constexpr int kChunk = 16;      // tokens of one chunk
constexpr int kStages = 2;      // ring depth per warp (paged_decode_attention.cuh measured 2 >= 3 > 4 on the H200)
constexpr int kThreadsTc = 128;  // 4 warps of 32

KWIKI_DEVICE uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

/// Copies the first `bytes` (0..16) of 16 bytes at src to dst and zero-fills the rest.
KWIKI_DEVICE void cp_async16(uint32_t dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
KWIKI_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
KWIKI_DEVICE void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

KWIKI_DEVICE void ldsm_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr) : "memory");
}

// D(16x8, fp32) = A(16x16) B(16x8) + C with A's and C's rows 8..15 zero: only the fragment's rows
// 0..7 (c0, c1) are kept.
template <typename T>
KWIKI_DEVICE void mma_top(float& c0, float& c1, uint32_t a0, uint32_t a2, uint32_t b0, uint32_t b1) {
  float d2, d3;
  const uint32_t z = 0u;
  const float zf = 0.f;
  if constexpr (std::is_same<T, kwiki_bf16>::value) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
        : "=f"(c0), "=f"(c1), "=f"(d2), "=f"(d3)
        : "r"(a0), "r"(z), "r"(a2), "r"(z), "r"(b0), "r"(b1), "f"(c0), "f"(c1), "f"(zf), "f"(zf));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
        : "=f"(c0), "=f"(c1), "=f"(d2), "=f"(d3)
        : "r"(a0), "r"(z), "r"(a2), "r"(z), "r"(b0), "r"(b1), "f"(c0), "f"(c1), "f"(zf), "f"(zf));
  }
}

// Two fp32 values -> two T in one 32-bit word (x in the low half), round to nearest even; and back.
template <typename T>
KWIKI_DEVICE uint32_t pack2(float x, float y) {
  if constexpr (std::is_same<T, kwiki_bf16>::value) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __half2 h = __floats2half2_rn(x, y);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}
template <typename T>
KWIKI_DEVICE float2 unpack2(uint32_t w) {
  if constexpr (std::is_same<T, kwiki_bf16>::value) {
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
  } else {
    __half2 h;
    *reinterpret_cast<uint32_t*>(&h) = w;
    return __half22float2(h);
  }
}

/// A stage's layout (bytes from its start), shared with the host-side check of the fragment
/// layouts (tests/gpu/mma_fragments_check.cu). K: piece (x group c, token r) at k_piece(c, r);
/// V after the D / 8 x 16 K pieces: piece (dim d, token half h) at v_piece(d, h).
KWIKI_HOST_DEVICE int k_piece(int c, int r) { return (c * kChunk + r) * 16; }
KWIKI_HOST_DEVICE int v_piece(int D, int d, int h) { return D * kChunk * 2 + d * 32 + ((h ^ ((d >> 2) & 1)) << 4); }
/// ldmatrix x4 addresses of this lane: K for k step kk (B fragments of tokens 0-7, then 8-15);
/// V for dims 16 c .. 16 c + 15 (B fragments of dims 16 c .. + 7, then 16 c + 8 .. + 15).
KWIKI_HOST_DEVICE int k_lane(int lane, int kk) { return k_piece(2 * kk + ((lane >> 3) & 1), ((lane >> 4) << 3) + (lane & 7)); }
KWIKI_HOST_DEVICE int v_lane(int D, int lane, int c) { return v_piece(D, 16 * c + (lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1); }

template <int D>
struct Sizes {
  static constexpr int STAGE = 2 * D * kChunk * 2;  // K then V of one chunk, 16-bit elements
  static constexpr int PIECES = D * kChunk / 8 / 32;  // 16-byte pieces per lane per tensor and chunk
};

template <typename T, int D, int NST>
KWIKI_GLOBAL void __launch_bounds__(kThreadsTc)
paged_vllm_tc_kernel(const T* __restrict__ query, const T* __restrict__ key_cache, const T* __restrict__ value_cache,
                     const int* __restrict__ block_tables, const int* __restrict__ seq_lens, T* __restrict__ out,
                     float* __restrict__ partial_out, float* __restrict__ partial_lse, Shape s) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  static_assert(sizeof(T) == 2, "the tensor-core path takes bf16 or fp16 (X = 8 elements, 16 bytes)");
  constexpr int STAGE = Sizes<D>::STAGE;
  constexpr int kWarpsTc = kThreadsTc / 32;
  constexpr float kLog2e = 1.4426950408889634f;
  extern __shared__ float4 tc_smem[];
  __shared__ float s_m[kWarpsTc][8];
  __shared__ float s_l[kWarpsTc][8];

  const int split = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
  const int G = s.Hq / s.Hkv;
  const bool direct = gridDim.x == 1;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int gid = lane >> 2, tig = lane & 3;  // mma fragment row (query head) and column pair
  const int len = min(max(seq_lens[b], 0), s.MB * s.P);
  const int ts = split * s.part;  // s.part: a multiple of kChunk, so a chunk lies in one page
  const int te = min(ts + s.part, len);
  const long long head0 = static_cast<long long>(b) * s.Hq + static_cast<long long>(kvh) * G;

  // Result of (query head head0 + g, dim d): out when the launch has one split, else the partials.
  auto write_result = [&](int g, int d, float o, float lse) {
    const long long h = head0 + g;
    if (direct) {
      out[h * D + d] = kwiki_from_float<T>(o);
    } else {
      partial_out[(h * s.S + split) * D + d] = o;
      if (d == 0) partial_lse[h * s.S + split] = lse;
    }
  };
  if (ts >= te) {  // an empty split (or an empty sequence): no weight in the merge
    for (int i = tid; i < G * D; i += kThreadsTc) write_result(i / D, i % D, 0.f, -INFINITY);
    return;
  }

  // A fragments of Q (rows = query heads; rows >= G and 8..15 are zero), unscaled.
  uint32_t qa[D / 16][2];
  {
    const bool row = gid < G;
    const T* qp = query + (head0 + (row ? gid : 0)) * D + tig * 2;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      qa[kk][0] = row ? *reinterpret_cast<const uint32_t*>(qp + kk * 16) : 0u;
      qa[kk][1] = row ? *reinterpret_cast<const uint32_t*>(qp + kk * 16 + 8) : 0u;
    }
  }
  const float qscale = s.scale * kLog2e;

  const int nch = (te - ts + kChunk - 1) / kChunk;
  const int mine = warp < nch ? (nch - 1 - warp) / kWarpsTc + 1 : 0;  // chunks warp, warp + 4, ...
  const int* const bt_row = block_tables + static_cast<long long>(b) * s.MB;
  const uint32_t ring = smem_u32(tc_smem) + static_cast<uint32_t>(warp * NST * STAGE);
  auto chunk_tok = [&](int i) { return ts + (warp + i * kWarpsTc) * kChunk; };
  // The page of chunk i, or -1 for an id outside [0, NB) (its tokens are masked).
  auto page_of = [&](int i) {
    const int page = bt_row[chunk_tok(i) / s.P];
    return page >= 0 && page < s.NB ? page : -1;
  };
  // cp.async of my i-th chunk into stage i % NST; bytes past te (and a masked page) read as zero.
  auto issue = [&](int i) {
    const int t0 = chunk_tok(i);
    const int page = page_of(i);
    const int valid = page < 0 ? 0 : min(kChunk, te - t0);  // tokens of the chunk to copy
    const long long head = (static_cast<long long>(page < 0 ? 0 : page) * s.Hkv + kvh);
    const T* const kp = key_cache + head * D * s.P + (t0 % s.P) * 8;   // + (c P + r) 8
    const T* const vp = value_cache + head * D * s.P + (t0 % s.P);     // + d P + h 8
    const uint32_t st = ring + static_cast<uint32_t>((i % NST) * STAGE);
#pragma unroll
    for (int j = 0; j < Sizes<D>::PIECES; ++j) {
      const int piece = lane + 32 * j;
      const int c = piece / kChunk, r = piece % kChunk;  // K: x group, token
      cp_async16(st + k_piece(c, r), kp + (static_cast<long long>(c) * s.P + r) * 8, r < valid ? 16 : 0);
      const int d = piece / 2, h = piece % 2;  // V: dim, token half
      const int vt = min(max(valid - 8 * h, 0), 8);
      cp_async16(st + v_piece(D, d, h), vp + static_cast<long long>(d) * s.P + 8 * h, vt * static_cast<int>(sizeof(T)));
    }
  };

  float m = -INFINITY, l = 0.f;  // state of query head gid (log2 domain); l: this lane's part
  float acc[D / 8][2];            // O[gid][nt * 8 + 2 * tig + {0, 1}]
#pragma unroll
  for (int nt = 0; nt < D / 8; ++nt) acc[nt][0] = acc[nt][1] = 0.f;

#pragma unroll
  for (int i = 0; i < NST - 1; ++i) {
    if (i < mine) issue(i);
    cp_async_commit();
  }
  for (int i = 0; i < mine; ++i) {
    if (i + NST - 1 < mine) issue(i + NST - 1);
    cp_async_commit();
    cp_async_wait<NST - 1>();
    __syncwarp();

    const uint32_t st = ring + static_cast<uint32_t>((i % NST) * STAGE);
    // S = Q K^T: two 8-token tiles.
    float s0[2] = {0.f, 0.f}, s1[2] = {0.f, 0.f};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t b0, b1, b2, b3;
      ldsm_x4(st + k_lane(lane, kk), b0, b1, b2, b3);
      mma_top<T>(s0[0], s0[1], qa[kk][0], qa[kk][1], b0, b1);
      mma_top<T>(s1[0], s1[1], qa[kk][0], qa[kk][1], b2, b3);
    }
    // Online softmax for query head gid; this lane holds tokens 2 tig + {0, 1} and 8 + 2 tig + {0, 1}.
    float x[4] = {s0[0] * qscale, s0[1] * qscale, s1[0] * qscale, s1[1] * qscale};
    const int t0 = chunk_tok(i);
    const int valid = page_of(i) < 0 ? 0 : te - t0;
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if ((j >> 1) * 8 + 2 * tig + (j & 1) >= valid) x[j] = -INFINITY;
    float cm = fmaxf(fmaxf(x[0], x[1]), fmaxf(x[2], x[3]));
    cm = fmaxf(cm, __shfl_xor_sync(0xffffffffu, cm, 1));
    cm = fmaxf(cm, __shfl_xor_sync(0xffffffffu, cm, 2));
    const float mn = fmaxf(m, cm);
    const float mref = mn == -INFINITY ? 0.f : mn;  // nothing seen yet: keep exp2 finite (all p = 0)
    const float alpha = exp2f(m - mref);
    m = mn;
    float p[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) p[j] = exp2f(x[j] - mref);
    l = l * alpha + ((p[0] + p[1]) + (p[2] + p[3]));
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt) {
      acc[nt][0] *= alpha;
      acc[nt][1] *= alpha;
    }
    // P as hi + lo in T (A fragment: a0 = tokens 2 tig + {0, 1}, a2 = tokens 8 + 2 tig + {0, 1}).
    const uint32_t h01 = pack2<T>(p[0], p[1]), h23 = pack2<T>(p[2], p[3]);
    const float2 f01 = unpack2<T>(h01), f23 = unpack2<T>(h23);
    const uint32_t l01 = pack2<T>(p[0] - f01.x, p[1] - f01.y), l23 = pack2<T>(p[2] - f23.x, p[3] - f23.y);
    // O += P V: pairs of 8-dim tiles.
#pragma unroll
    for (int c = 0; c < D / 16; ++c) {
      uint32_t b0, b1, b2, b3;
      ldsm_x4(st + v_lane(D, lane, c), b0, b1, b2, b3);
      mma_top<T>(acc[2 * c][0], acc[2 * c][1], h01, h23, b0, b1);
      mma_top<T>(acc[2 * c][0], acc[2 * c][1], l01, l23, b0, b1);
      mma_top<T>(acc[2 * c + 1][0], acc[2 * c + 1][1], h01, h23, b2, b3);
      mma_top<T>(acc[2 * c + 1][0], acc[2 * c + 1][1], l01, l23, b2, b3);
    }
    __syncwarp();  // every lane is done with stage i % NST before it is refilled
  }
  cp_async_wait<0>();
  __syncwarp();

  // The quad's partial sums; then the warps are merged through shared memory (each warp's acc
  // goes into its own, now idle, ring).
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  unsigned char* const smem_bytes = reinterpret_cast<unsigned char*>(tc_smem);
  float* const s_acc = reinterpret_cast<float*>(smem_bytes + static_cast<size_t>(warp) * NST * STAGE);  // [8][D]
#pragma unroll
  for (int nt = 0; nt < D / 8; ++nt) {
    s_acc[gid * D + nt * 8 + 2 * tig] = acc[nt][0];
    s_acc[gid * D + nt * 8 + 2 * tig + 1] = acc[nt][1];
  }
  if (tig == 0) {
    s_m[warp][gid] = m;
    s_l[warp][gid] = l;
  }
  __syncthreads();
  for (int i = tid; i < G * D; i += kThreadsTc) {
    const int g = i / D, d = i % D;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarpsTc; ++w) mx = fmaxf(mx, s_m[w][g]);
    if (mx == -INFINITY) {
      write_result(g, d, 0.f, -INFINITY);
      continue;
    }
    float lsum = 0.f, o = 0.f;
#pragma unroll
    for (int w = 0; w < kWarpsTc; ++w) {
      const float f = exp2f(s_m[w][g] - mx);
      lsum = fmaf(s_l[w][g], f, lsum);
      o = fmaf(reinterpret_cast<const float*>(smem_bytes + static_cast<size_t>(w) * NST * STAGE)[g * D + d], f, o);
    }
    write_result(g, d, o / lsum, (mx + log2f(lsum)) * 0.6931471805599453f);
  }
#endif
}

}  // namespace tc
#endif  // KWIKI_PLATFORM_CUDA

template <typename T, int NG, int ND>
inline int launch_ng(const T* q, const T* kc, const T* vc, const int* bt, const int* sl, T* out, float* po, float* pl, const Shape& s,
                     size_t shared, kwiki_stream_t stream) {
  const dim3 grid(static_cast<unsigned>(s.S), static_cast<unsigned>(s.Hkv), static_cast<unsigned>(s.B));
  paged_decode_vllm_kernel<T, NG, ND><<<grid, kThreads, shared, stream>>>(q, kc, vc, bt, sl, out, po, pl, s);
  return 0;
}

template <typename T, int ND>
inline int launch_nd(const T* q, const T* kc, const T* vc, const int* bt, const int* sl, T* out, float* po, float* pl, const Shape& s, int G,
                     size_t shared, kwiki_stream_t stream) {
  if (G <= 1) return launch_ng<T, 1, ND>(q, kc, vc, bt, sl, out, po, pl, s, shared, stream);
  if (G <= 2) return launch_ng<T, 2, ND>(q, kc, vc, bt, sl, out, po, pl, s, shared, stream);
  if (G <= 4) return launch_ng<T, 4, ND>(q, kc, vc, bt, sl, out, po, pl, s, shared, stream);
  if (G <= 8) return launch_ng<T, 8, ND>(q, kc, vc, bt, sl, out, po, pl, s, shared, stream);
  return launch_ng<T, 16, ND>(q, kc, vc, bt, sl, out, po, pl, s, shared, stream);
}

#if KWIKI_PLATFORM_CUDA
/// The splits the tensor-core kernel uses (at most S): the least modeled time, waves of resident
/// blocks x (the block's 64-token steps, 16 tokens a warp, + a fixed cost), plus the merge when
/// there is more than one; the fewest splits among equals.
inline int choose_tc_splits(long long items, long long tokens, long long S, long long resident) {
  constexpr long long kStep = 4 * tc::kChunk;
  constexpr long long kBlockCost = 1;  // steps' worth: the queries, the warps' merge, the writes
  constexpr long long kMergeCost = 1;
  const long long most = std::min<long long>({S, 65535, std::max<long long>(1, (tokens + tc::kChunk - 1) / tc::kChunk)});
  long long best = 1, best_cost = -1;
  for (long long sp = 1; sp <= most; ++sp) {
    const long long part = ((tokens + sp - 1) / sp + tc::kChunk - 1) / tc::kChunk * tc::kChunk;
    const long long waves = (items * sp + resident - 1) / resident;
    const long long cost = waves * ((part + kStep - 1) / kStep + kBlockCost) + (sp > 1 ? kMergeCost : 0);
    if (best_cost < 0 || cost < best_cost) {
      best = sp;
      best_cost = cost;
    }
  }
  return static_cast<int>(best);
}

/// The tensor-core path (see its comment); -1 where it does not apply here (then the caller
/// falls back): G > 8, P not a multiple of 16, unaligned tensors, a device or binary older than
/// sm_80, or too little shared memory.
template <typename T, int D>
inline int launch_tc(const T* q, const T* kc, const T* vc, const int* bt, const int* sl, T* out, float* po, float* pl, Shape s,
                     kwiki_stream_t stream) {
  if (s.Hq / s.Hkv > 8 || s.P % tc::kChunk != 0 || !kwiki::aligned16(q) || !kwiki::aligned16(kc) || !kwiki::aligned16(vc)) return -1;
  const auto kernel = tc::paged_vllm_tc_kernel<T, D, tc::kStages>;
  const int smem = tc::kThreadsTc / 32 * tc::kStages * tc::Sizes<D>::STAGE;
  int dev = 0, optin = 0, per_sm = 0;
  cudaFuncAttributes attr{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
      smem + 256 > optin || cudaFuncGetAttributes(&attr, kernel) != cudaSuccess || attr.ptxVersion < 80 || attr.binaryVersion < 80 ||
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, tc::kThreadsTc, static_cast<size_t>(smem)) != cudaSuccess || per_sm < 1) {
    (void)cudaGetLastError();
    return -1;
  }
  const long long tokens = static_cast<long long>(s.MB) * s.P;
  const int used = choose_tc_splits(static_cast<long long>(s.B) * s.Hkv, tokens, s.S, static_cast<long long>(per_sm) * kwiki::multiprocessor_count());
  s.part = static_cast<int>(((tokens + used - 1) / used + tc::kChunk - 1) / tc::kChunk * tc::kChunk);
  const dim3 grid(static_cast<unsigned>(used), static_cast<unsigned>(s.Hkv), static_cast<unsigned>(s.B));
  kernel<<<grid, tc::kThreadsTc, static_cast<size_t>(smem), stream>>>(q, kc, vc, bt, sl, out, po, pl, s);
  if (used > 1) {
    const int e = kwiki_last_error();
    if (e != 0) return e;
    merge_kernel<T><<<dim3(static_cast<unsigned>(s.Hq), static_cast<unsigned>(s.B)), kThreads, 0, stream>>>(po, pl, out, D, s.S, used);
  }
  return kwiki_last_error();
}
#endif  // KWIKI_PLATFORM_CUDA

/// Launches the attention (and the merge when S > 1) on `stream`; 0, the launch error, or -1 for
/// sizes it cannot serve (see the header comment).
template <typename T>
inline int launch(const T* q, const T* kc, const T* vc, const int* bt, const int* sl, T* out, float* po, float* pl, long long B, long long Hq,
                  long long Hkv, long long D, long long P, long long MB, long long S, long long X, long long NB, float scale,
                  kwiki_stream_t stream) {
  constexpr int W = kwiki::vec_width<T>();
  if (B < 0 || Hkv < 1 || Hq < Hkv || Hq % Hkv != 0 || Hq / Hkv > 16 || D < 1 || D > 2 * kThreads || X != W || D % X != 0) return -1;
  if (P < W || P > 1024 || (P & (P - 1)) != 0 || MB < 1 || S < 1 || NB < 1 || B > 65535 || Hkv > 65535 || S > (1ll << 20)) return -1;
  if (B == 0) return 0;
  if (S > 1 && (po == nullptr || pl == nullptr)) return -1;
  const long long per_split = (MB * P + S - 1) / S;
  const long long part = (per_split + P - 1) / P * P;
  const int G = static_cast<int>(Hq / Hkv);
  const int NG = G <= 1 ? 1 : G <= 2 ? 2 : G <= 4 ? 4 : G <= 8 ? 8 : 16;
  const size_t shared = sizeof(float) * (static_cast<size_t>(NG) * D + static_cast<size_t>(NG) * part + 2 * NG);
  if (part > kMaxPartition || shared > static_cast<size_t>(kMaxSharedBytes)) return -1;
  const Shape s{static_cast<int>(B), static_cast<int>(Hq), static_cast<int>(Hkv), static_cast<int>(D), static_cast<int>(P), static_cast<int>(MB),
                static_cast<int>(S), static_cast<int>(part), NB, scale};
#if KWIKI_PLATFORM_CUDA
  if constexpr (KWIKI_DECODE_TENSOR_CORES != 0 && !std::is_same<T, float>::value) {
    if (D == 64 || D == 128) {
      const int r = D == 64 ? launch_tc<T, 64>(q, kc, vc, bt, sl, out, po, pl, s, stream) : launch_tc<T, 128>(q, kc, vc, bt, sl, out, po, pl, s, stream);
      if (r != -1) return r;
    }
  }
#endif
  if (D <= kThreads) launch_nd<T, 1>(q, kc, vc, bt, sl, out, po, pl, s, G, shared, stream);
  else launch_nd<T, 2>(q, kc, vc, bt, sl, out, po, pl, s, G, shared, stream);
  if (S > 1)
    merge_kernel<T><<<dim3(static_cast<unsigned>(Hq), static_cast<unsigned>(B)), kThreads, 0, stream>>>(po, pl, out, static_cast<int>(D),
                                                                                                   static_cast<int>(S), static_cast<int>(S));
  return kwiki_last_error();
}

}  // namespace kwiki_paged_decode_vllm

#ifdef KWIKI_DEFINE_LAUNCHER
KWIKI_EXPORT int kwiki_abi_version(void) { return 1; }

KWIKI_EXPORT int kwiki_launch(void* const* tensors, int num_tensors, const long long* dims, int num_dims, const double* params,
                              int num_params, void* stream) {
  if (tensors == nullptr || dims == nullptr || params == nullptr || num_tensors != 8 || num_dims != 9 || num_params < 1) return -1;
  for (int i = 0; i < 6; ++i)
    if (tensors[i] == nullptr) return -1;  // the partials may be null when S = 1
  return kwiki_paged_decode_vllm::launch<KWIKI_T>(
      static_cast<const KWIKI_T*>(tensors[0]), static_cast<const KWIKI_T*>(tensors[1]), static_cast<const KWIKI_T*>(tensors[2]),
      static_cast<const int*>(tensors[3]), static_cast<const int*>(tensors[4]), static_cast<KWIKI_T*>(tensors[5]), static_cast<float*>(tensors[6]),
      static_cast<float*>(tensors[7]), dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], dims[6], dims[7], dims[8], static_cast<float>(params[0]),
      static_cast<kwiki_stream_t>(stream));
}
#endif  // KWIKI_DEFINE_LAUNCHER

#endif  // KWIKI_PAGED_DECODE_ATTENTION_VLLM_CUH
