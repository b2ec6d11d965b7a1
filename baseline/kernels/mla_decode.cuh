// mla_decode.cuh: kwiki V0 template, MLA decode (DeepSeek multi-head latent attention with the
// projections absorbed; FlashMLA / vLLM MLA decode semantics), paged, with split-KV.
//
//   out[b, h, :] = sum_t softmax_t(scale * q[b, h] . c_t) c_t[:Dv] over the seq_lens[b] cached
//   rows c_t of sequence b (one latent KV head shared by every query head: c_t is the key, and its
//   first Dv dims the value); token t in page block_tables[b, t / P], slot t % P. DeepSeek-V2/V3:
//   Dqk = 576 (512 latent + 64 rope), Dv = 512. A sequence of length 0 gives zeros.
//
// ABI (ABI.md): tensors query[B,H,Dqk], kv_cache[NB,P,Dqk], block_tables[B,MB] (int32),
// seq_lens[B] (int32), out[B,H,Dv], partial_out[B,H,S,Dv] (fp32), partial_lse[B,H,S] (fp32);
// dims B, H, Dqk, Dv, P, MB, S, NB; params scale. Served: Dqk a multiple of 16 bytes of KWIKI_T,
// Dv <= 8 x the block's threads, a split of at most 256 tokens (S >= ceil(MB * P / 256)). A page
// id outside [0, NB) masks its tokens (the CPU twin refuses it).
//
// Design, two kernels; launch() takes the first that applies (the first only where
// KWIKI_DECODE_TENSOR_CORES is 1: see below the includes).
// 1. Tensor cores (mla_decode_tc_kernel; CUDA builds for sm_80+, T bf16 or fp16, Dqk a multiple
//    of 16, Dv a multiple of 64 up to 512: DeepSeek's 576 / 512): a block holds 16 or 32 query
//    heads and streams its split of the sequence through shared memory in 32-token tiles
//    (cp.async, double-buffered), so each latent row is read from memory once for all of them;
//    both products on mma.sync m16n8k16 with an online softmax between them (see its comment
//    below). The launcher chooses how many of the caller's S splits it uses (choose_tc_splits:
//    the least modeled time in waves of resident blocks, the fewest splits among equals; S
//    itself gave a block 125-256 tokens at the bench's shapes). Before it, at session 12 on the
//    H200, the CUDA-core kernel below moved 1.1-7.4% of the copy bandwidth
//    (bench/results/serving_kernels_h200-session12.txt); by its structure (a warp a token for
//    the scores, each thread walking the split's rows one at a time for the values) few loads
//    are in flight per SM (not profiled).
// 2. CUDA cores (mla_decode_kernel; HIP, fp32 and every other shape): grid (S, ceil(H / 16), B),
//    4 warps a block; a block serves a group of up to 16 query heads (their rows in shared
//    memory), so a latent row is read once per head group: once per sequence at DeepSeek-V3
//    with tensor parallel 8 (16 heads a GPU). Scores: a warp per token, the row's 16-byte chunks
//    over the lanes against the group's queries; the 16 dot products leave the warp by a
//    reduce-scatter butterfly (15 + log2(warp / 16) shuffles, not 16 x 5). The split's scores
//    stay in shared memory; a warp per head takes their max and the sum of exponentials.
//    Values: thread i owns Dv / threads consecutive dims and walks every token of the split, so
//    a row's first Dv dims are read by the block as one contiguous sweep.
// With one split a block writes out; otherwise fp32 partials and their log-sum-exp, merged by a
// second kernel.
#ifndef KWIKI_MLA_DECODE_CUH
#define KWIKI_MLA_DECODE_CUH

#include <algorithm>

#include "kwiki_compat.cuh"

// The tensor-core path (tc:: below) is V0's on CUDA: it passed every serving-bench shape on the H200
// in session 14 (bench/results/serving_kernels_h200-session14-tc.txt) at 1.5-5x the CUDA-core
// kernel's speed. -DKWIKI_DECODE_TENSOR_CORES=0 builds the CUDA-core kernel instead.
#ifndef KWIKI_DECODE_TENSOR_CORES
#define KWIKI_DECODE_TENSOR_CORES 1
#endif

namespace kwiki_mla_decode {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * KWIKI_WARP_SIZE;
constexpr int kHeadGroup = 16;           // query heads of one block
constexpr int kMaxPartition = 256;       // tokens of one split (their scores live in shared memory)
constexpr int kMaxSharedBytes = 48 * 1024;
constexpr int kStatSlots = 2 * kHeadGroup;

/// The sizes of one launch, checked by launch().
struct Shape {
  int B, H, Dqk, Dv, P, MB, S, part, ld;  // part: tokens of one split; ld: its score row stride (a multiple of 4)
  long long NB;
  float scale;
};

/// DPT consecutive elements from p as fp32, in one load of DPT x sizeof(T) bytes (p aligned to it).
template <typename T, int DPT>
KWIKI_DEVICE void load_dims(const T* __restrict__ p, float (&out)[DPT]) {
  constexpr int kBytes = DPT * static_cast<int>(sizeof(T));
  if constexpr (kBytes == 2 || kBytes == 4 || kBytes == 8 || kBytes == 16) {
    struct alignas(kBytes) Pack {
      T v[DPT];
    };
    const Pack pk = *reinterpret_cast<const Pack*>(p);
#pragma unroll
    for (int j = 0; j < DPT; ++j) out[j] = kwiki_to_float(pk.v[j]);
  } else {
#pragma unroll
    for (int j = 0; j < DPT; ++j) out[j] = kwiki_to_float(p[j]);
  }
}

/// The NG lane-partial dot products summed over the warp, scattered: afterwards lane l holds, in
/// acc[0], the full sum of head l / (warp / NG). NG is a power of two <= the warp size.
template <int NG>
KWIKI_DEVICE void reduce_scatter(float (&acc)[NG], int lane) {
  int off = KWIKI_WARP_SIZE / 2;
#pragma unroll
  for (int half = NG / 2; half >= 1; half /= 2, off /= 2) {
    const bool upper = (lane & off) != 0;
#pragma unroll
    for (int i = 0; i < half; ++i) {
      const float send = upper ? acc[i] : acc[i + half];
      const float keep = upper ? acc[i + half] : acc[i];
      acc[i] = keep + kwiki_shfl_xor(send, off);
    }
  }
  for (; off >= 1; off /= 2) acc[0] += kwiki_shfl_xor(acc[0], off);
}

/// One (split, head group, sequence) block. NG: heads of the group (a power of two <= 16); DPT:
/// value dims a thread owns.
template <typename T, int NG, int DPT>
KWIKI_GLOBAL void __launch_bounds__(kThreads, 1)
mla_decode_kernel(const T* __restrict__ query, const T* __restrict__ kv_cache, const int* __restrict__ block_tables,
                  const int* __restrict__ seq_lens, T* __restrict__ out, float* __restrict__ partial_out, float* __restrict__ partial_lse,
                  Shape s) {
  constexpr int X = kwiki::vec_width<T>();
  extern __shared__ float4 smem_raw[];
  float* scores = reinterpret_cast<float*>(smem_raw);  // [NG][ld]
  float* stats = scores + NG * s.ld;                    // [NG] max, [NG] sum, in kStatSlots
  T* q_s = reinterpret_cast<T*>(stats + kStatSlots);    // [NG][Dqk] in T, 16-byte aligned (ld and kStatSlots are multiples of 4)
  const int split = blockIdx.x, b = blockIdx.z;
  const int h0 = blockIdx.y * NG;
  const int G = min(NG, s.H - h0);  // heads of this group
  const int warp = threadIdx.x / KWIKI_WARP_SIZE, lane = threadIdx.x % KWIKI_WARP_SIZE;
  const int len = min(max(seq_lens[b], 0), s.MB * s.P);
  const int start = split * s.part;
  const int end = min(start + s.part, len);
  const long long head0 = static_cast<long long>(b) * s.H + h0;

  if (start >= end) {  // an empty split (or an empty sequence): no weight in the merge
    for (int i = threadIdx.x; i < G * s.Dv; i += blockDim.x) {
      const long long h = head0 + i / s.Dv;
      const int d = i % s.Dv;
      if (s.S == 1) out[h * s.Dv + d] = kwiki_from_float<T>(0.f);
      else partial_out[(h * s.S + split) * s.Dv + d] = 0.f;
    }
    if (s.S > 1)
      for (int g = threadIdx.x; g < G; g += blockDim.x) partial_lse[(head0 + g) * s.S + split] = -INFINITY;
    return;
  }

  for (int i = threadIdx.x; i < NG * s.Dqk; i += blockDim.x) {
    const int g = i / s.Dqk;
    q_s[i] = g < G ? query[(head0 + g) * s.Dqk + i % s.Dqk] : kwiki_from_float<T>(0.f);
  }
  __syncthreads();

  // Scores: a warp per token; lanes over the row's 16-byte chunks.
  const int chunks = s.Dqk / X;
  const int n = end - start;
  for (int i = warp; i < n; i += kWarps) {
    const int t = start + i;
    const int page = block_tables[static_cast<long long>(b) * s.MB + t / s.P];
    const bool valid = page >= 0 && page < s.NB;  // uniform over the warp
    float acc[NG];
#pragma unroll
    for (int g = 0; g < NG; ++g) acc[g] = 0.f;
    if (valid) {
      const T* row = kv_cache + (static_cast<long long>(page) * s.P + t % s.P) * s.Dqk;
      for (int c = lane; c < chunks; c += KWIKI_WARP_SIZE) {
        float k[X];
        kwiki::load_f32<X>(row + c * X, k);
#pragma unroll
        for (int g = 0; g < NG; ++g) {
          float q[X];
          kwiki::load_f32<X>(q_s + g * s.Dqk + c * X, q);
#pragma unroll
          for (int j = 0; j < X; ++j) acc[g] = fmaf(q[j], k[j], acc[g]);
        }
      }
    }
    reduce_scatter<NG>(acc, lane);
    constexpr int kLanesPerHead = KWIKI_WARP_SIZE / NG;
    const int g = lane / kLanesPerHead;
    if (lane % kLanesPerHead == 0 && g < G) scores[g * s.ld + i] = valid ? acc[0] * s.scale : -INFINITY;
  }
  __syncthreads();

  // Softmax statistics per head: a warp per head; scores become exp(score - max).
  for (int g = warp; g < G; g += kWarps) {
    float* sc = scores + g * s.ld;
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
      stats[kHeadGroup + g] = sum;
    }
  }
  __syncthreads();

  // Values: thread i owns dims [i * DPT, (i + 1) * DPT) of every token's row.
  const int d0 = threadIdx.x * DPT;
  float o[NG][DPT];
#pragma unroll
  for (int g = 0; g < NG; ++g)
#pragma unroll
    for (int j = 0; j < DPT; ++j) o[g][j] = 0.f;
  if (d0 < s.Dv) {
    for (int i = 0; i < n; ++i) {
      const int t = start + i;
      const int page = block_tables[static_cast<long long>(b) * s.MB + t / s.P];
      if (page < 0 || page >= s.NB) continue;  // masked: its weight is exp(-inf) = 0
      float v[DPT];
      load_dims<T, DPT>(kv_cache + (static_cast<long long>(page) * s.P + t % s.P) * s.Dqk + d0, v);
#pragma unroll
      for (int g = 0; g < NG; ++g) {
        const float p = scores[g * s.ld + i];
#pragma unroll
        for (int j = 0; j < DPT; ++j) o[g][j] = fmaf(p, v[j], o[g][j]);
      }
    }
#pragma unroll
    for (int g = 0; g < NG; ++g) {
      if (g >= G) continue;
      const float sum = stats[kHeadGroup + g];
      const long long h = head0 + g;
#pragma unroll
      for (int j = 0; j < DPT; ++j) {
        const int d = d0 + j;
        if (d >= s.Dv) continue;
        const float val = o[g][j] * (sum > 0.f ? 1.f / sum : 0.f);
        if (s.S == 1) out[h * s.Dv + d] = kwiki_from_float<T>(val);
        else partial_out[(h * s.S + split) * s.Dv + d] = val;
      }
    }
  }
  if (s.S > 1 && threadIdx.x < G) {
    const int g = threadIdx.x;
    const float sum = stats[kHeadGroup + g];
    partial_lse[(head0 + g) * s.S + split] = sum > 0.f ? stats[g] + logf(sum) : -INFINITY;
  }
}

/// out[b, h, :] = sum_s exp(lse_s - LSE) partial_out_s; grid (H, B).
template <typename T>
KWIKI_GLOBAL void __launch_bounds__(kThreads, 1)
merge_kernel(const float* __restrict__ partial_out, const float* __restrict__ partial_lse, T* __restrict__ out, int Dv, int S) {
  const long long h = static_cast<long long>(blockIdx.y) * gridDim.x + blockIdx.x;
  const float* lse = partial_lse + h * S;
  float m = -INFINITY;
  for (int i = 0; i < S; ++i) m = fmaxf(m, lse[i]);
  float total = 0.f;
  for (int i = 0; i < S; ++i) total += m == -INFINITY ? 0.f : expf(lse[i] - m);
  const float inv_total = total > 0.f ? 1.f / total : 0.f;
  for (int d = threadIdx.x; d < Dv; d += blockDim.x) {
    float acc = 0.f;
    for (int i = 0; i < S; ++i)
      if (lse[i] != -INFINITY) acc += expf(lse[i] - m) * partial_out[(h * S + i) * Dv + d];
    out[h * Dv + d] = kwiki_from_float<T>(acc * inv_total);
  }
}

// =============================================================================================
// Tensor-core path (CUDA, sm_80+; T bf16 or fp16, Dqk a multiple of 16, Dv a multiple of 64 and
// at most 512). Grid (ceil(H / NH), splits, B), 4 warps a block, NH = 16 x MT query heads a block
// (MT = 1 for H <= 16, else 2); blockIdx.x is the head group, so the groups of one sequence and
// split start side by side and share each KV tile through the L2. The block walks its split in
// tiles of kTile tokens, staged in shared memory by cp.async (two stages: tile j + 1 is in flight
// while tile j is used; rows past the split or on a masked page are zero-filled), so every KV
// row is read from memory once for all NH heads. Per tile: S = Q K^T by mma.sync m16n8k16 (A =
// the group's queries, B = the tile's rows, both through ldmatrix; warp w takes tokens 8w..8w+7
// over all Dqk dims), scaled scores to shared memory; online softmax in fp32 (128 / NH threads a
// head); O += P V by mma.sync (warp w owns value dims [w Dv / 4, (w + 1) Dv / 4), B through
// ldmatrix.trans from the same staged rows). P goes into the second product as two 16-bit terms,
// hi = T(p) and lo = T(p - hi), as in paged_decode_attention.cuh, so it keeps about 16
// significant bits instead of being rounded to T. The launcher picks the splits it uses (at most
// S; the fewest that fill the device, from the occupancy) and merges them with merge_tc_kernel.
// =============================================================================================
#if KWIKI_PLATFORM_CUDA
namespace tc {

constexpr int kTile = 32;               // tokens a stage holds (4 warps x one 8-token mma tile)
constexpr int kStages = 2;
constexpr int kThreadsTc = 128;         // 4 warps of 32
constexpr int kRowPad = 8;              // elements after each staged row: ldmatrix rows spread over the banks
constexpr int kScoreLd = kTile + 8;     // row stride of the fp32 scores
constexpr int kProbLd = kTile + 8;      // row stride of P (80 bytes for 16-bit T: conflict-free ldmatrix)
constexpr int kMaxDvTiles = 16;         // 8-dim tiles a warp owns: Dv <= 4 x 8 x 16 = 512
constexpr int kMaxSplits = 1024;        // splits the launcher uses at most (the merge keeps their weights in shared memory)
constexpr int kMergeDims = 32;          // value dims of one merge block

KWIKI_DEVICE uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

KWIKI_DEVICE void cp_async16(uint32_t dst, const void* src, bool fill) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(fill ? 16 : 0) : "memory");
}
KWIKI_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
KWIKI_DEVICE void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

KWIKI_DEVICE void ldsm_x2(uint32_t addr, uint32_t (&r)[2]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr) : "memory");
}
KWIKI_DEVICE void ldsm_x4(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}
KWIKI_DEVICE void ldsm_x4_t(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}

/// ldmatrix addressing, shared with the host-side check of the fragment layouts
/// (tests/gpu/mla_fragments_check.cu): an x4 over a 16 x 16 tile takes its row x4_row(lane) and
/// column x4_col(lane) from this lane (matrices: rows 0-7 / 8-15 x columns 0-7 / 8-15, the order
/// of mma's A fragment, and with .trans of two B fragments); an x2 over an 8 x 16 tile (8 rows,
/// the B fragment of 16 columns) row x2_row(lane), column x2_col(lane).
KWIKI_HOST_DEVICE int x4_row(int lane) { return (lane & 7) + ((lane >> 3) & 1) * 8; }
KWIKI_HOST_DEVICE int x4_col(int lane) { return (lane >> 4) * 8; }
KWIKI_HOST_DEVICE int x2_row(int lane) { return lane & 7; }
KWIKI_HOST_DEVICE int x2_col(int lane) { return ((lane >> 3) & 1) * 8; }

/// d += a (16 x 16, row-major) b (16 x 8, column-major), fp32 accumulators. Not volatile: a
/// register-only instruction the compiler may schedule among the ldmatrix loads.
template <typename T>
KWIKI_DEVICE void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same<T, kwiki_bf16>::value) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

/// The tensor-core kernel's shared memory, in bytes from its start (every part 16-byte aligned).
struct TcLayout {
  int ld;  // row stride of the staged query and KV rows, in elements (Dqk + kRowPad)
  int kv, scores, p_hi, p_lo, stats, bytes;
};

KWIKI_HOST_DEVICE TcLayout tc_layout(int NH, int Dqk) {
  TcLayout L;
  L.ld = Dqk + kRowPad;
  L.kv = NH * L.ld * 2;                          // after the queries [NH][ld]
  L.scores = L.kv + kStages * kTile * L.ld * 2;  // [NH][kScoreLd] fp32
  L.p_hi = L.scores + NH * kScoreLd * 4;         // [NH][kProbLd] T
  L.p_lo = L.p_hi + NH * kProbLd * 2;
  L.stats = L.p_lo + NH * kProbLd * 2;           // [NH] alpha, [NH] sum, [NH] max (fp32)
  L.bytes = L.stats + 3 * NH * 4;
  return L;
}

/// One (head group, split, sequence) block; NH = 16 x MT query heads. s.S is the stride of the
/// partials (the ABI's S); gridDim.y the splits used, s.part the tokens of one.
template <typename T, int MT>
KWIKI_GLOBAL void __launch_bounds__(kThreadsTc)
mla_decode_tc_kernel(const T* __restrict__ query, const T* __restrict__ kv_cache, const int* __restrict__ block_tables,
                     const int* __restrict__ seq_lens, T* __restrict__ out, float* __restrict__ partial_out, float* __restrict__ partial_lse,
                     Shape s) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  constexpr int NH = 16 * MT;
  constexpr int TPH = kThreadsTc / NH;  // softmax threads of one head (8 or 4; consecutive lanes)
  constexpr int TPT = kTile / TPH;      // tokens of one softmax thread
  extern __shared__ float4 smem_raw[];
  unsigned char* const base = reinterpret_cast<unsigned char*>(smem_raw);
  const TcLayout L = tc_layout(NH, s.Dqk);
  T* const q_s = reinterpret_cast<T*>(base);
  T* const kv_s = reinterpret_cast<T*>(base + L.kv);
  float* const sc_s = reinterpret_cast<float*>(base + L.scores);
  T* const ph_s = reinterpret_cast<T*>(base + L.p_hi);
  T* const pl_s = reinterpret_cast<T*>(base + L.p_lo);
  float* const alpha_s = reinterpret_cast<float*>(base + L.stats);
  float* const sum_s = alpha_s + NH;
  float* const max_s = sum_s + NH;

  const int h0 = blockIdx.x * NH, split = blockIdx.y, b = blockIdx.z;
  const int G = min(NH, s.H - h0);  // heads of this group
  const bool direct = gridDim.y == 1;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int len = min(max(seq_lens[b], 0), s.MB * s.P);
  const int start = split * s.part;
  const int end = min(start + s.part, len);
  const long long head0 = static_cast<long long>(b) * s.H + h0;

  if (start >= end) {  // an empty split (or an empty sequence): no weight in the merge
    for (int i = tid; i < G * s.Dv; i += kThreadsTc) {
      const long long h = head0 + i / s.Dv;
      const int d = i % s.Dv;
      if (direct) out[h * s.Dv + d] = kwiki_from_float<T>(0.f);
      else partial_out[(h * s.S + split) * s.Dv + d] = 0.f;
    }
    if (!direct)
      for (int g = tid; g < G; g += kThreadsTc) partial_lse[(head0 + g) * s.S + split] = -INFINITY;
    return;
  }

  const int chunks = s.Dqk / 8;  // 16-byte pieces of a row
  const int* const bt_row = block_tables + static_cast<long long>(b) * s.MB;
  // The page of token t, or -1 when t is past the split or its page id is outside [0, NB).
  auto page_of = [&](int t) {
    if (t >= end) return -1;
    const int page = bt_row[t / s.P];
    return page >= 0 && page < s.NB ? page : -1;
  };
  // cp.async of tile j into stage j % kStages: warp w takes rows w, w + 4, ...; its lanes the
  // row's 16-byte pieces (one page lookup a row).
  auto load_tile = [&](int j) {
    const int t0 = start + j * kTile;
    T* const dst = kv_s + (j % kStages) * kTile * L.ld;
    for (int r = warp; r < kTile; r += kThreadsTc / 32) {
      const int t = t0 + r;
      const int page = page_of(t);
      const T* const row = page >= 0 ? kv_cache + (static_cast<long long>(page) * s.P + t % s.P) * s.Dqk : kv_cache;
      const uint32_t d = smem_u32(dst + r * L.ld);
      for (int piece = lane; piece < chunks; piece += 32) cp_async16(d + piece * 16, page >= 0 ? row + piece * 8 : kv_cache, page >= 0);
    }
  };

  // The group's queries (rows >= G zero), with tile 0, as the first cp.async group.
  for (int r = warp; r < NH; r += kThreadsTc / 32) {
    const T* const row = r < G ? query + (head0 + r) * s.Dqk : query;
    const uint32_t d = smem_u32(q_s + r * L.ld);
    for (int piece = lane; piece < chunks; piece += 32) cp_async16(d + piece * 16, r < G ? row + piece * 8 : query, r < G);
  }
  load_tile(0);
  cp_async_commit();

  // ldmatrix addressing: an x4 of a 16 x 16 tile at (row0, col0) takes row row0 + a_row, column
  // col0 + a_col from this lane (matrices: rows 0-7 / 8-15 x columns 0-7 / 8-15, as mma's A wants).
  const int a_row = x4_row(lane), a_col = x4_col(lane);
  const int g = lane >> 2, c2 = (lane & 3) * 2;  // accumulator fragment: rows g, g + 8; columns c2, c2 + 1
  const int dv_tiles = s.Dv / 32;                // 8-dim tiles of a warp
  const int d0 = warp * (s.Dv / 4);              // this warp's first value dim
  const int ksteps = s.Dqk / 16;
  const int sh = tid / TPH, sj = tid % TPH;      // softmax: head and part
  float m_run = -INFINITY, l_run = 0.f;          // head sh's running max and sum (every thread of the head holds them)

  float o[MT][kMaxDvTiles][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int n = 0; n < kMaxDvTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][n][e] = 0.f;

  const int tiles = (end - start + kTile - 1) / kTile;
  for (int j = 0; j < tiles; ++j) {
    cp_async_wait_all();
    __syncthreads();  // tile j (and the queries) visible; every warp done with tile j - 1's stage and P
    if (j + 1 < tiles) load_tile(j + 1);
    cp_async_commit();
    const T* const kt = kv_s + (j % kStages) * kTile * L.ld;

    // S = Q K^T for tokens 8 warp .. 8 warp + 7: two accumulator chains (even / odd k steps).
    {
      float acc[2][MT][4];
#pragma unroll
      for (int u = 0; u < 2; ++u)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[u][mt][e] = 0.f;
      // x2 of K: lanes 0-7 address tokens 0-7 at dims k0..k0+7, lanes 8-15 at k0+8..k0+15.
      const uint32_t kb = smem_u32(kt + (warp * 8 + x2_row(lane)) * L.ld + x2_col(lane));
      const uint32_t qa = smem_u32(q_s + a_row * L.ld + a_col);
      for (int ks = 0; ks < ksteps; ks += 2) {
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          if (ks + u < ksteps) {
            uint32_t bf[2];
            ldsm_x2(kb + static_cast<uint32_t>((ks + u) * 32), bf);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              uint32_t af[4];
              ldsm_x4(qa + static_cast<uint32_t>((mt * 16 * L.ld + (ks + u) * 16) * 2), af);
              mma16816<T>(acc[u][mt], af, bf[0], bf[1]);
            }
          }
        }
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          float* const row = sc_s + (mt * 16 + g + hf * 8) * kScoreLd + warp * 8 + c2;
          row[0] = (acc[0][mt][2 * hf] + acc[1][mt][2 * hf]) * s.scale;
          row[1] = (acc[0][mt][2 * hf + 1] + acc[1][mt][2 * hf + 1]) * s.scale;
        }
    }
    __syncthreads();

    // Online softmax of head sh over the tile: this thread takes tokens sj TPT .. sj TPT + TPT - 1.
    {
      const int t0 = start + j * kTile;
      float x[TPT];
      float mx = -INFINITY;
#pragma unroll
      for (int i = 0; i < TPT; ++i) {
        const int col = sj * TPT + i;
        x[i] = page_of(t0 + col) >= 0 ? sc_s[sh * kScoreLd + col] : -INFINITY;
        mx = fmaxf(mx, x[i]);
      }
#pragma unroll
      for (int off = 1; off < TPH; off <<= 1) mx = fmaxf(mx, kwiki_shfl_xor(mx, off));
      const float m_new = fmaxf(m_run, mx);
      const float m_ref = m_new == -INFINITY ? 0.f : m_new;  // nothing seen yet: every p is 0, alpha 0
      const float alpha = expf(m_run - m_ref);
      float sum = 0.f;
#pragma unroll
      for (int i = 0; i < TPT; ++i) {
        const float p = expf(x[i] - m_ref);
        const T hi = kwiki_from_float<T>(p);
        ph_s[sh * kProbLd + sj * TPT + i] = hi;
        pl_s[sh * kProbLd + sj * TPT + i] = kwiki_from_float<T>(p - kwiki_to_float(hi));
        sum += p;
      }
#pragma unroll
      for (int off = 1; off < TPH; off <<= 1) sum += kwiki_shfl_xor(sum, off);
      l_run = l_run * alpha + sum;
      m_run = m_new;
      if (sj == 0) alpha_s[sh] = alpha;
    }
    __syncthreads();

    // O = alpha O + P V over this warp's value dims.
    {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const float a_lo = alpha_s[mt * 16 + g], a_hi = alpha_s[mt * 16 + g + 8];
#pragma unroll
        for (int n = 0; n < kMaxDvTiles; ++n) {
          o[mt][n][0] *= a_lo;
          o[mt][n][1] *= a_lo;
          o[mt][n][2] *= a_hi;
          o[mt][n][3] *= a_hi;
        }
      }
#pragma unroll
      for (int ks = 0; ks < kTile / 16; ++ks) {
        uint32_t ph[MT][4], pl[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          ldsm_x4(smem_u32(ph_s + (mt * 16 + a_row) * kProbLd + ks * 16 + a_col), ph[mt]);
          ldsm_x4(smem_u32(pl_s + (mt * 16 + a_row) * kProbLd + ks * 16 + a_col), pl[mt]);
        }
        // x4.trans of V: tokens ks 16 + a_row, dims d0 + 16 np + a_col; gives the B fragments of
        // the 8-dim tiles 2 np (v[0], v[1]) and 2 np + 1 (v[2], v[3]).
        const uint32_t vb = smem_u32(kt + (ks * 16 + a_row) * L.ld + d0 + a_col);
#pragma unroll
        for (int np = 0; np < kMaxDvTiles / 2; ++np) {
          if (2 * np < dv_tiles) {
            uint32_t v[4];
            ldsm_x4_t(vb + static_cast<uint32_t>(np * 32), v);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              mma16816<T>(o[mt][2 * np], ph[mt], v[0], v[1]);
              mma16816<T>(o[mt][2 * np], pl[mt], v[0], v[1]);
              mma16816<T>(o[mt][2 * np + 1], ph[mt], v[2], v[3]);
              mma16816<T>(o[mt][2 * np + 1], pl[mt], v[2], v[3]);
            }
          }
        }
      }
    }
  }

  if (sj == 0) {
    sum_s[sh] = l_run;
    max_s[sh] = m_run;
  }
  __syncthreads();
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int r = mt * 16 + g + hf * 8;
      if (r >= G) continue;
      const float sum = sum_s[r];
      const float inv = sum > 0.f ? 1.f / sum : 0.f;
      const long long h = head0 + r;
#pragma unroll
      for (int n = 0; n < kMaxDvTiles; ++n) {
        if (n >= dv_tiles) continue;
        const int d = d0 + n * 8 + c2;
        const float v0 = o[mt][n][2 * hf] * inv, v1 = o[mt][n][2 * hf + 1] * inv;
        if (direct) {
          out[h * s.Dv + d] = kwiki_from_float<T>(v0);
          out[h * s.Dv + d + 1] = kwiki_from_float<T>(v1);
        } else {
          float* const po = partial_out + (h * s.S + split) * s.Dv + d;
          po[0] = v0;
          po[1] = v1;
        }
      }
    }
  if (!direct && tid < G) {
    const float sum = sum_s[tid];
    partial_lse[(head0 + tid) * s.S + split] = sum > 0.f ? max_s[tid] + logf(sum) : -INFINITY;
  }
#endif
}

/// out[b, h, d] = sum_i exp(lse_i - LSE) partial_out_i over the `used` splits (stride S); grid
/// (ceil(Dv / kMergeDims), H, B), 128 threads: warp w takes splits w, w + 4, ...
template <typename T>
KWIKI_GLOBAL void __launch_bounds__(kThreadsTc)
merge_tc_kernel(const float* __restrict__ partial_out, const float* __restrict__ partial_lse, T* __restrict__ out, int H, int Dv, int S, int used) {
  __shared__ float w_s[kMaxSplits];
  __shared__ float part_s[kThreadsTc / 32][kMergeDims];
  __shared__ float total_s;
  const long long h = static_cast<long long>(blockIdx.z) * H + blockIdx.y;
  const float* const lse = partial_lse + h * S;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  if (warp == 0) {  // the weights exp(lse_i - max) and their total, by one warp
    float m = -INFINITY;
    for (int i = lane; i < used; i += 32) m = fmaxf(m, lse[i]);
    m = kwiki::warp_reduce_max(m);
    float total = 0.f;
    for (int i = lane; i < used; i += 32) {
      const float w = m == -INFINITY || lse[i] == -INFINITY ? 0.f : expf(lse[i] - m);
      w_s[i] = w;
      total += w;
    }
    total = kwiki::warp_reduce_sum(total);
    if (lane == 0) total_s = total;
  }
  __syncthreads();
  const float total = total_s;
  const int d = blockIdx.x * kMergeDims + lane;
  float acc = 0.f;
  if (d < Dv)
    for (int i = warp; i < used; i += kThreadsTc / 32) {
      const float w = w_s[i];
      if (w != 0.f) acc += w * partial_out[(h * S + i) * Dv + d];
    }
  part_s[warp][lane] = acc;
  __syncthreads();
  if (warp == 0 && d < Dv) {
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < kThreadsTc / 32; ++w) sum += part_s[w][lane];
    out[h * Dv + d] = kwiki_from_float<T>(total > 0.f ? sum / total : 0.f);
  }
}

}  // namespace tc
#endif  // KWIKI_PLATFORM_CUDA

template <typename T, int NG, int DPT>
inline void launch_kernel(const T* q, const T* c, const int* bt, const int* sl, T* out, float* po, float* pl, const Shape& s, size_t shared,
                          kwiki_stream_t stream) {
  const dim3 grid(static_cast<unsigned>(s.S), static_cast<unsigned>((s.H + NG - 1) / NG), static_cast<unsigned>(s.B));
  mla_decode_kernel<T, NG, DPT><<<grid, kThreads, shared, stream>>>(q, c, bt, sl, out, po, pl, s);
}

template <typename T, int DPT>
inline void launch_dpt(const T* q, const T* c, const int* bt, const int* sl, T* out, float* po, float* pl, const Shape& s, int NG, size_t shared,
                       kwiki_stream_t stream) {
  switch (NG) {
    case 1: launch_kernel<T, 1, DPT>(q, c, bt, sl, out, po, pl, s, shared, stream); break;
    case 2: launch_kernel<T, 2, DPT>(q, c, bt, sl, out, po, pl, s, shared, stream); break;
    case 4: launch_kernel<T, 4, DPT>(q, c, bt, sl, out, po, pl, s, shared, stream); break;
    case 8: launch_kernel<T, 8, DPT>(q, c, bt, sl, out, po, pl, s, shared, stream); break;
    default: launch_kernel<T, 16, DPT>(q, c, bt, sl, out, po, pl, s, shared, stream); break;
  }
}

#if KWIKI_PLATFORM_CUDA
/// The splits the tensor-core kernel uses (at most S): the fewest with the least modeled time,
/// waves of resident blocks x (the kTile-token tiles of a split + a block's fixed cost), plus the
/// merge when there is more than one.
inline int choose_tc_splits(long long items, long long tokens, long long S, long long resident) {
  constexpr long long kBlockCost = 2;  // tiles' worth: loading the queries, writing the result
  constexpr long long kMergeCost = 1;
  const long long most = std::min<long long>({S, tc::kMaxSplits, std::max<long long>(1, (tokens + tc::kTile - 1) / tc::kTile)});
  long long best = 1, best_cost = -1;
  for (long long sp = 1; sp <= most; ++sp) {
    const long long part = (tokens + sp - 1) / sp;
    const long long waves = (items * sp + resident - 1) / resident;
    const long long cost = waves * ((part + tc::kTile - 1) / tc::kTile + kBlockCost) + (sp > 1 ? kMergeCost : 0);
    if (best_cost < 0 || cost < best_cost) {
      best = sp;
      best_cost = cost;
    }
  }
  return static_cast<int>(best);
}

/// The tensor-core path (see its comment); -1 where it cannot run here (the device or the
/// binary is older than sm_80, or its shared memory does not fit), and the caller falls back.
template <typename T, int MT>
inline int launch_tc(const T* q, const T* c, const int* bt, const int* sl, T* out, float* po, float* pl, Shape s, kwiki_stream_t stream) {
  constexpr int NH = 16 * MT;
  const auto kernel = tc::mla_decode_tc_kernel<T, MT>;
  const tc::TcLayout L = tc::tc_layout(NH, s.Dqk);
  int dev = 0, optin = 0, per_sm = 0;
  cudaFuncAttributes attr{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
      L.bytes > optin || cudaFuncGetAttributes(&attr, kernel) != cudaSuccess || attr.ptxVersion < 80 || attr.binaryVersion < 80 ||
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, L.bytes) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, tc::kThreadsTc, static_cast<size_t>(L.bytes)) != cudaSuccess || per_sm < 1) {
    (void)cudaGetLastError();
    return -1;
  }
  const long long tokens = static_cast<long long>(s.MB) * s.P;
  const int groups = (s.H + NH - 1) / NH;
  const int used = choose_tc_splits(static_cast<long long>(s.B) * groups, tokens, s.S,
                                    static_cast<long long>(per_sm) * kwiki::multiprocessor_count());
  s.part = static_cast<int>((tokens + used - 1) / used);
  const dim3 grid(static_cast<unsigned>(groups), static_cast<unsigned>(used), static_cast<unsigned>(s.B));
  kernel<<<grid, tc::kThreadsTc, static_cast<size_t>(L.bytes), stream>>>(q, c, bt, sl, out, po, pl, s);
  if (used > 1) {
    const int e = kwiki_last_error();
    if (e != 0) return e;
    const dim3 mgrid(static_cast<unsigned>((s.Dv + tc::kMergeDims - 1) / tc::kMergeDims), static_cast<unsigned>(s.H), static_cast<unsigned>(s.B));
    tc::merge_tc_kernel<T><<<mgrid, tc::kThreadsTc, 0, stream>>>(po, pl, out, s.H, s.Dv, s.S, used);
  }
  return kwiki_last_error();
}
#endif  // KWIKI_PLATFORM_CUDA

/// Launches MLA decode (and the merge when S > 1) on `stream`; 0, the launch error, or -1 for
/// sizes it cannot serve (see the header comment).
template <typename T>
inline int launch(const T* q, const T* c, const int* bt, const int* sl, T* out, float* po, float* pl, long long B, long long H, long long Dqk,
                  long long Dv, long long P, long long MB, long long S, long long NB, float scale, kwiki_stream_t stream) {
  constexpr int X = kwiki::vec_width<T>();
  if (B < 0 || B > 65535 || H < 1 || H > 65535 * 16 || Dqk < X || Dqk % X != 0 || Dv < 1 || Dv > Dqk || Dv > 8 * kThreads) return -1;
  if (P < 1 || MB < 1 || S < 1 || S > (1ll << 20) || NB < 1 || MB * P > (1ll << 30)) return -1;
  if (B == 0) return 0;
  if (S > 1 && (po == nullptr || pl == nullptr)) return -1;
  if (!kwiki::aligned16(q) || !kwiki::aligned16(c)) return -1;
  const long long part = (MB * P + S - 1) / S;
  const int NG = H >= 16 ? 16 : H > 4 ? 8 : H > 2 ? 4 : static_cast<int>(H);
  const long long per_thread = (Dv + kThreads - 1) / kThreads;
  const int DPT = per_thread <= 1 ? 1 : per_thread <= 2 ? 2 : per_thread <= 4 ? 4 : 8;
  if (Dqk % DPT != 0) return -1;  // a thread's dims are one aligned load
  const long long ld = (part + 3) / 4 * 4;  // keeps the queries after the scores 16-byte aligned
  const size_t shared = sizeof(float) * static_cast<size_t>(NG * ld + kStatSlots) + sizeof(T) * static_cast<size_t>(NG * Dqk);
  if (part > kMaxPartition || shared > static_cast<size_t>(kMaxSharedBytes)) return -1;
  const Shape s{static_cast<int>(B), static_cast<int>(H), static_cast<int>(Dqk), static_cast<int>(Dv), static_cast<int>(P), static_cast<int>(MB),
                static_cast<int>(S), static_cast<int>(part), static_cast<int>(ld), NB, scale};
#if KWIKI_PLATFORM_CUDA
  if constexpr (KWIKI_DECODE_TENSOR_CORES != 0 && !std::is_same<T, float>::value) {
    if (Dqk % 16 == 0 && Dv % 64 == 0 && Dv <= 512 && H <= 65535) {
      const int r = H > 16 ? launch_tc<T, 2>(q, c, bt, sl, out, po, pl, s, stream) : launch_tc<T, 1>(q, c, bt, sl, out, po, pl, s, stream);
      if (r != -1) return r;
    }
  }
#endif
  switch (DPT) {
    case 1: launch_dpt<T, 1>(q, c, bt, sl, out, po, pl, s, NG, shared, stream); break;
    case 2: launch_dpt<T, 2>(q, c, bt, sl, out, po, pl, s, NG, shared, stream); break;
    case 4: launch_dpt<T, 4>(q, c, bt, sl, out, po, pl, s, NG, shared, stream); break;
    default: launch_dpt<T, 8>(q, c, bt, sl, out, po, pl, s, NG, shared, stream); break;
  }
  if (S > 1)
    merge_kernel<T><<<dim3(static_cast<unsigned>(H), static_cast<unsigned>(B)), kThreads, 0, stream>>>(po, pl, out, static_cast<int>(Dv),
                                                                                                      static_cast<int>(S));
  return kwiki_last_error();
}

}  // namespace kwiki_mla_decode

#ifdef KWIKI_DEFINE_LAUNCHER
KWIKI_EXPORT int kwiki_abi_version(void) { return 1; }

KWIKI_EXPORT int kwiki_launch(void* const* tensors, int num_tensors, const long long* dims, int num_dims, const double* params,
                              int num_params, void* stream) {
  if (tensors == nullptr || dims == nullptr || params == nullptr || num_tensors != 7 || num_dims != 8 || num_params < 1) return -1;
  for (int i = 0; i < 5; ++i)
    if (tensors[i] == nullptr) return -1;  // the partials may be null when S = 1
  return kwiki_mla_decode::launch<KWIKI_T>(static_cast<const KWIKI_T*>(tensors[0]), static_cast<const KWIKI_T*>(tensors[1]),
                                           static_cast<const int*>(tensors[2]), static_cast<const int*>(tensors[3]), static_cast<KWIKI_T*>(tensors[4]),
                                           static_cast<float*>(tensors[5]), static_cast<float*>(tensors[6]), dims[0], dims[1], dims[2], dims[3],
                                           dims[4], dims[5], dims[6], dims[7], static_cast<float>(params[0]), static_cast<kwiki_stream_t>(stream));
}
#endif  // KWIKI_DEFINE_LAUNCHER

#endif  // KWIKI_MLA_DECODE_CUH
