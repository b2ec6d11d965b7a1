// prefill_attention.cuh: kwiki V0 template, prefill attention over packed variable-length
// sequences (flash_attn_varlen_func semantics), and its unified form that reads K/V through a
// block table (vLLM's unified attention: mixed prefill chunks and decode tokens in one batch).
//
//   Sequence b owns query rows cu_seqlens_q[b] .. cu_seqlens_q[b+1] (lq of them) and lk keys:
//     layout 0 (packed): key rows cu_seqlens_k[b] .. cu_seqlens_k[b+1] of k/v [Tk, Hkv, D];
//     layout 1 (paged):  the seq_lens[b] tokens of its context in k/v caches [NB, P, Hkv, D],
//                        token t in page block_tables[b, t / P], slot t % P; Tk = NB * P.
//   out[i, h, :] = sum_j softmax_j(scale * q[i, h] . k_j) v_j over the keys j query i sees; query
//   head h reads KV head h / (Hq / Hkv) (GQA, MQA). Causal: the queries are the last lq tokens of
//   the sequence (mask aligned to the end, as flash-attn >= 2.1 and vLLM): query i (0-based in its
//   sequence) sees keys j <= i + lk - lq. A query that sees no key gets zeros.
//
// ABI (ABI.md): tensors q[Tq,Hq,D], k, v (layout 0: [Tk,Hkv,D]; layout 1: [NB,P,Hkv,D]),
// cu_seqlens_q[B+1] (int32), kv_lens (int32; layout 0: cu_seqlens_k[B+1], layout 1: seq_lens[B]),
// out[Tq,Hq,D], block_tables[B,MB] (int32; layout 1, else null); dims B, Hq, Hkv, D, Tq, Tk,
// max_seqlen_q, causal, layout, P, MB; params scale. Served: D 64, 128 or 256, 16-byte aligned
// tensors. max_seqlen_q must be at least every sequence's lq (the grid covers that many rows a
// sequence); rows outside every sequence are not written. Offsets read from the device are clamped
// into the tensors (a page id outside [0, NB) reads as zeros; the CPU twin refuses such inputs).
//
// Design (FlashAttention-2 order, CUDA cores on both platforms in V0): a block of 128 threads per
// (tile of 32 query rows, query head, sequence), one linear grid (the longest tiles of a causal
// sequence first). The tile's queries stay in shared memory as T; K/V tiles of BN keys (4096 / D
// for 16-bit T) go through shared memory as T in 16-byte chunks (rows padded by 16 bytes: the four
// keys a warp reads at once and the eight query rows sit in distinct banks). Four threads share a
// query row: each scores BN / 4 of the tile's keys (fp32 dot products), the scores go to shared
// memory scaled by scale x log2(e), and each of the four then keeps the row's online softmax (running
// max and sum, exp2 in fp32) and a quarter of its output (D / 4 fp32 accumulators, interleaved
// 16-byte chunks) over the tile's values. One rounding at the store.
// A tensor-core path (tc:: below: mma.sync, CUDA, 16-bit T, D 64/128) is V0's on CUDA: it passed every
// serving-bench shape on the H200 in session 14 (bench/results/serving_kernels_h200-session14-prefill.txt)
// at 2.8-7x the CUDA-core kernel; -DKWIKI_PREFILL_TENSOR_CORES=0 builds the CUDA-core kernel instead.
#ifndef KWIKI_PREFILL_ATTENTION_CUH
#define KWIKI_PREFILL_ATTENTION_CUH

#include <type_traits>

#include "kwiki_compat.cuh"

#ifndef KWIKI_PREFILL_TENSOR_CORES
#define KWIKI_PREFILL_TENSOR_CORES 1
#endif

namespace kwiki_prefill_attention {

constexpr int kThreads = 128;
constexpr int kRowThreads = 4;                   // threads that share one query row
constexpr int kBlockM = kThreads / kRowThreads;  // query rows of a block
constexpr long long kMaxBlocks = 1ll << 24;      // grid x threads stays below 2^31 on both platforms

/// Keys of one K/V tile: the tiles and the query tile fit in 48 KB of static shared memory.
template <typename T, int D>
struct BlockN {
  static constexpr int value = sizeof(T) == 2 ? 4096 / D : (D == 256 ? 4 : 2048 / D);
};

/// The sizes of one launch, checked by launch().
struct Shape {
  int B, Hq, Hkv, Tq, causal, layout, P, MB, tiles;
  long long Tk;
  float scale_log2;  // scale x log2(e): the softmax runs in exp2
};

KWIKI_DEVICE int clamp_int(long long v, long long lo, long long hi) { return static_cast<int>(v < lo ? lo : v > hi ? hi : v); }

/// What a block works on: its sequence b, query head h and KV head, the sequence's queries [q0, q0 + lq)
/// (its tile: rows m0 .. m0 + rows - 1), its keys (layout 0: rows k0 .. k0 + lk - 1 of k/v; layout 1:
/// tokens 0 .. lk - 1 through the block table), the query-to-token shift, and kend, the keys any row of
/// the tile sees. Offsets read from the device are clamped to the tensors' extents.
struct BlockWork {
  int h, b, kvh, q0, lq, m0, rows, lk, shift, kend;
  long long k0, num_pages;
};

/// The work of block blockIdx.x for tiles of kRows query rows (the last tiles first: causal rows see
/// more keys); false when its tile starts past its sequence.
template <int kRows>
KWIKI_DEVICE bool block_work(const int* __restrict__ cu_q, const int* __restrict__ kv_lens, const Shape& s, BlockWork& w) {
  const long long idx = blockIdx.x;
  w.h = static_cast<int>(idx % s.Hq);
  const long long rest = idx / s.Hq;
  const int tile = s.tiles - 1 - static_cast<int>(rest % s.tiles);
  w.b = static_cast<int>(rest / s.tiles);
  w.kvh = w.h / (s.Hq / s.Hkv);
  w.q0 = clamp_int(cu_q[w.b], 0, s.Tq);
  w.lq = clamp_int(cu_q[w.b + 1], w.q0, s.Tq) - w.q0;
  w.m0 = tile * kRows;
  if (w.m0 >= w.lq) return false;
  w.k0 = 0;
  if (s.layout == 0) {
    w.k0 = clamp_int(kv_lens[w.b], 0, s.Tk);
    w.lk = clamp_int(kv_lens[w.b + 1], w.k0, s.Tk) - static_cast<int>(w.k0);
  } else {
    w.lk = clamp_int(kv_lens[w.b], 0, static_cast<long long>(s.MB) * s.P);
  }
  w.rows = w.lq - w.m0 < kRows ? w.lq - w.m0 : kRows;
  w.shift = w.lk - w.lq;  // query i is token i + shift of the sequence
  w.kend = w.lk;
  if (s.causal) {
    const int last = w.m0 + w.rows - 1 + w.shift + 1;
    w.kend = last < 0 ? 0 : last < w.lk ? last : w.lk;
  }
  w.num_pages = s.layout == 1 ? s.Tk / s.P : 0;
  return true;
}

/// The row of k / v (in [Tk] or [NB * P]) that holds key j of the block's sequence, or -1 for a key
/// past kend or a page id outside the cache (it reads as zeros).
KWIKI_DEVICE long long key_row(const int* __restrict__ block_tables, const Shape& s, const BlockWork& w, int j) {
  if (j >= w.kend) return -1;
  if (s.layout == 0) return w.k0 + j;
  const long long page = block_tables[static_cast<long long>(w.b) * s.MB + j / s.P];
  return page >= 0 && page < w.num_pages ? page * s.P + j % s.P : -1;
}

/// Keys n0 .. n0 + BN - 1 of the block's sequence into k_s and v_s (rows of LD elements, 16-byte
/// chunks of X), zeros past kend or for a page id outside the cache; kThreadsOf threads share it.
template <typename T, int D, int X, int LD, int BN, int kThreadsOf>
KWIKI_DEVICE void stage_kv_tile(const T* __restrict__ k, const T* __restrict__ v, const int* __restrict__ block_tables, const Shape& s,
                                const BlockWork& w, int n0, T* k_s, T* v_s) {
  constexpr int CH = D / X;
  for (int i = threadIdx.x; i < BN * CH; i += kThreadsOf) {
    const int jj = i / CH, ch = i % CH;
    uint4 kx = make_uint4(0u, 0u, 0u, 0u), vx = kx;
    const long long row = key_row(block_tables, s, w, n0 + jj);
    if (row >= 0) {
      const long long off = (row * s.Hkv + w.kvh) * D + ch * X;
      kx = *reinterpret_cast<const uint4*>(k + off);
      vx = *reinterpret_cast<const uint4*>(v + off);
    }
    *reinterpret_cast<uint4*>(k_s + jj * LD + ch * X) = kx;
    *reinterpret_cast<uint4*>(v_s + jj * LD + ch * X) = vx;
  }
}

/// One (query tile, query head, sequence) block; see the header comment.
template <typename T, int D>
KWIKI_GLOBAL void __launch_bounds__(kThreads, 1)
prefill_attention_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, const int* __restrict__ cu_q,
                         const int* __restrict__ kv_lens, const int* __restrict__ block_tables, T* __restrict__ out, Shape s) {
  constexpr int X = kwiki::vec_width<T>();
  constexpr int BN = BlockN<T, D>::value;
  constexpr int LD = D + X;                 // a shared row: D elements and 16 bytes of padding
  constexpr int CH = D / X;                 // 16-byte chunks of a row
  constexpr int CPT = CH / kRowThreads;     // output chunks a thread owns (c, c + 4, ...)
  constexpr int KPT = BN / kRowThreads;     // keys a thread scores per tile (c, c + 4, ...)
  constexpr int SLD = BN + 1;               // a row of scores, padded
  static_assert(CH % kRowThreads == 0 && BN % kRowThreads == 0, "tile shapes");
  __shared__ __align__(16) unsigned char smem[sizeof(T) * (kBlockM + 2 * BN) * LD + sizeof(float) * kBlockM * SLD];
  T* const q_s = reinterpret_cast<T*>(smem);
  T* const k_s = q_s + kBlockM * LD;
  T* const v_s = k_s + BN * LD;
  float* const s_s = reinterpret_cast<float*>(v_s + BN * LD);

  BlockWork w;
  if (!block_work<kBlockM>(cu_q, kv_lens, s, w)) return;  // the whole block: no barrier is pending
  const int h = w.h, q0 = w.q0, lq = w.lq, m0 = w.m0, rows = w.rows, shift = w.shift, kend = w.kend;

  // The tile's queries (rows past the sequence are zeros, computed and not stored).
  for (int i = threadIdx.x; i < kBlockM * CH; i += kThreads) {
    const int r = i / CH, ch = i % CH;
    uint4 val = make_uint4(0u, 0u, 0u, 0u);
    if (r < rows) val = *reinterpret_cast<const uint4*>(q + (static_cast<long long>(q0 + m0 + r) * s.Hq + h) * D + ch * X);
    *reinterpret_cast<uint4*>(q_s + r * LD + ch * X) = val;
  }

  const int r = threadIdx.x / kRowThreads, c = threadIdx.x % kRowThreads;
  const int qpos = m0 + r + shift;  // this row's token position: causal keys j <= qpos
  float m = -INFINITY, l = 0.f;
  float o[CPT][X];
#pragma unroll
  for (int i = 0; i < CPT; ++i)
#pragma unroll
    for (int x = 0; x < X; ++x) o[i][x] = 0.f;

  for (int n0 = 0; n0 < kend; n0 += BN) {
    __syncthreads();  // the previous tile's K/V and scores are consumed (and the queries stored)
    stage_kv_tile<T, D, X, LD, BN, kThreads>(k, v, block_tables, s, w, n0, k_s, v_s);
    __syncthreads();

    // Scores of this thread's keys c, c + 4, ... against its row.
    float acc[KPT];
#pragma unroll
    for (int kk = 0; kk < KPT; ++kk) acc[kk] = 0.f;
#pragma unroll 2
    for (int ch = 0; ch < CH; ++ch) {
      float qf[X];
      kwiki::load_f32<X>(q_s + r * LD + ch * X, qf);
#pragma unroll
      for (int kk = 0; kk < KPT; ++kk) {
        float kf[X];
        kwiki::load_f32<X>(k_s + (c + kRowThreads * kk) * LD + ch * X, kf);
#pragma unroll
        for (int x = 0; x < X; ++x) acc[kk] = fmaf(qf[x], kf[x], acc[kk]);
      }
    }
#pragma unroll
    for (int kk = 0; kk < KPT; ++kk) {
      const int jj = c + kRowThreads * kk, j = n0 + jj;
      const bool seen = j < kend && (!s.causal || j <= qpos);
      s_s[r * SLD + jj] = seen ? acc[kk] * s.scale_log2 : -INFINITY;
    }
    __syncthreads();

    // Online softmax of the row over the tile, then this thread's quarter of P V.
    const int n = kend - n0 < BN ? kend - n0 : BN;
    const float* const srow = s_s + r * SLD;
    float mt = m;
    for (int jj = 0; jj < n; ++jj) mt = fmaxf(mt, srow[jj]);
    const float mref = mt == -INFINITY ? 0.f : mt;  // nothing seen yet: every p is exp2(-inf) = 0
    const float alpha = exp2f(m - mref);
    m = mt;
    l *= alpha;
#pragma unroll
    for (int i = 0; i < CPT; ++i)
#pragma unroll
      for (int x = 0; x < X; ++x) o[i][x] *= alpha;
    for (int jj = 0; jj < n; ++jj) {
      const float p = exp2f(srow[jj] - mref);
      l += p;
#pragma unroll
      for (int i = 0; i < CPT; ++i) {
        float vf[X];
        kwiki::load_f32<X>(v_s + jj * LD + (c + kRowThreads * i) * X, vf);
#pragma unroll
        for (int x = 0; x < X; ++x) o[i][x] = fmaf(p, vf[x], o[i][x]);
      }
    }
  }

  if (r < rows) {
    const float inv = l > 0.f ? 1.f / l : 0.f;
    T* const dst = out + (static_cast<long long>(q0 + m0 + r) * s.Hq + h) * D;
#pragma unroll
    for (int i = 0; i < CPT; ++i) {
      float f[X];
#pragma unroll
      for (int x = 0; x < X; ++x) f[x] = o[i][x] * inv;
      kwiki::store_f32<X>(dst + (c + kRowThreads * i) * X, f);
    }
  }
}

// =============================================================================================
// Tensor-core path (CUDA sm_80+, T bf16 or fp16, D 64 or 128; V0's on CUDA, see the header): the
// same grid and masks with 64 query rows a block, 16 a warp. A warp's Q rows stay in registers as
// mma A fragments; K/V tiles of 64 keys go through one shared buffer each (rows padded by 16 bytes),
// filled by cp.async one phase ahead: K of tile t + 1 lands during tile t's softmax and P V, V of
// t + 1 during t + 1's Q K^T (on the H200, 7-27% less time than loading each tile before its use,
// at the task shapes, session 18). S = Q K^T on mma.sync m16n8k16 (B fragments of 8 keys x 32 dims
// by one ldmatrix.x4), online softmax in fp32 on the accumulators (a row's four lanes share it by
// two shuffles), P rounded to T as the A operand (FlashAttention-2's register reuse) and O += P V
// with B through ldmatrix.trans of the V rows. The host emulation (bench/gpu/host_emulation) runs
// it with mma and ldmatrix emulated per the PTX fragment layouts.
// =============================================================================================
#if KWIKI_PLATFORM_CUDA
namespace tc {

constexpr int kWarps = 4;
constexpr int kThreadsTc = 32 * kWarps;
constexpr int kBlockMTc = 16 * kWarps;  // query rows of a block
constexpr int kBlockNTc = 64;           // keys of a K/V tile

/// Two fp32 values rounded to T and packed (lo = a).
template <typename T>
KWIKI_DEVICE uint32_t pack2(float a, float b) {
  const uint32_t lo = kwiki::bit_cast<unsigned short>(kwiki_from_float<T>(a));
  const uint32_t hi = kwiki::bit_cast<unsigned short>(kwiki_from_float<T>(b));
  return lo | (hi << 16);
}

#ifdef KWIKI_HOST_EMULATION
// The emulation's kwiki_compat.cuh provides kwiki::mma16816 and kwiki_emu::ldsm_x4(_trans); its
// copies are synchronous, so commit and wait have nothing to do.
template <typename T>
KWIKI_DEVICE void ldsm_x4_trans(const T* p, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) { kwiki_emu::ldsm_x4_trans(p, r0, r1, r2, r3); }
template <typename T>
KWIKI_DEVICE void ldsm_x4(const T* p, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) { kwiki_emu::ldsm_x4(p, r0, r1, r2, r3); }
KWIKI_DEVICE void copy16_async(void* dst, const void* src, bool valid) {
  if (valid) std::memcpy(dst, src, 16);
  else std::memset(dst, 0, 16);
}
KWIKI_DEVICE void async_commit() {}
template <int kPending>
KWIKI_DEVICE void async_wait() {}
#else
/// Four 8x8 b16 matrices: lanes 8q .. 8q + 7 give the row addresses of matrix q.
template <typename T>
KWIKI_DEVICE void ldsm_x4(const T* p, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n" : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr) : "memory");
}
/// 16 bytes global -> shared without a register round trip (cp.async, sm_80+); zeros when !valid.
KWIKI_DEVICE void copy16_async(void* dst, const void* src, bool valid) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(addr), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
KWIKI_DEVICE void async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
/// Waits until at most kPending of this thread's committed copy groups are still in flight.
template <int kPending>
KWIKI_DEVICE void async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}
/// Four 8x8 b16 matrices, transposed: lanes 8q .. 8q + 7 give the row addresses of matrix q.
template <typename T>
KWIKI_DEVICE void ldsm_x4_trans(const T* p, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr) : "memory");
}
#endif

/// Keys n0 .. n0 + BN - 1 of one of k / v (`src`) into dst (rows of LD elements) by 16-byte
/// asynchronous copies, zeros past kend or for a page id outside the cache; one commit group.
template <typename T, int D, int LD, int BN, int kThreadsOf>
KWIKI_DEVICE void stage_rows_async(const T* __restrict__ src, const int* __restrict__ block_tables, const Shape& s, const BlockWork& w, int n0,
                                   T* dst) {
  constexpr int X = 8, CH = D / X;
  for (int i = threadIdx.x; i < BN * CH; i += kThreadsOf) {
    const int jj = i / CH, ch = i % CH;
    const long long row = key_row(block_tables, s, w, n0 + jj);
    copy16_async(dst + jj * LD + ch * X, row >= 0 ? src + (row * s.Hkv + w.kvh) * D + ch * X : src, row >= 0);
  }
  async_commit();
}

// Blocks an SM must hold at D = 64 (its 173 registers a thread give 2; 168 give 3 without spills).
#ifndef KWIKI_PREFILL_D64_MIN_BLOCKS
#define KWIKI_PREFILL_D64_MIN_BLOCKS 1
#endif

/// One (64-row query tile, query head, sequence) block of 4 warps; see the comment above.
template <typename T, int D>
KWIKI_GLOBAL void __launch_bounds__(kThreadsTc, D == 64 ? KWIKI_PREFILL_D64_MIN_BLOCKS : 1)
prefill_attention_tc_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, const int* __restrict__ cu_q,
                            const int* __restrict__ kv_lens, const int* __restrict__ block_tables, T* __restrict__ out, Shape s) {
  constexpr int X = 8;          // 16-byte chunks of 16-bit T
  constexpr int LD = D + X;     // a shared row, padded by 16 bytes
  constexpr int BN = kBlockNTc;
  __shared__ __align__(16) unsigned char smem[sizeof(T) * 2 * BN * LD];
  T* const k_s = reinterpret_cast<T*>(smem);
  T* const v_s = k_s + BN * LD;

  BlockWork w;
  if (!block_work<kBlockMTc>(cu_q, kv_lens, s, w)) return;
  const int h = w.h, q0 = w.q0, lq = w.lq, m0 = w.m0, shift = w.shift, kend = w.kend;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gid = lane / 4, tig = lane % 4;
  const int r0 = m0 + warp * 16 + gid, r1 = r0 + 8;  // this lane's two query rows (in the sequence)
  uint32_t qa[D / 16][4];
  {
    const T* const p0 = q + (static_cast<long long>(q0 + r0) * s.Hq + h) * D + tig * 2;
    const T* const p1 = q + (static_cast<long long>(q0 + r1) * s.Hq + h) * D + tig * 2;
    const bool v0 = r0 < lq, v1 = r1 < lq;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      qa[kk][0] = v0 ? *reinterpret_cast<const uint32_t*>(p0 + kk * 16) : 0u;
      qa[kk][1] = v1 ? *reinterpret_cast<const uint32_t*>(p1 + kk * 16) : 0u;
      qa[kk][2] = v0 ? *reinterpret_cast<const uint32_t*>(p0 + kk * 16 + 8) : 0u;
      qa[kk][3] = v1 ? *reinterpret_cast<const uint32_t*>(p1 + kk * 16 + 8) : 0u;
    }
  }
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  float o[D / 8][4];
#pragma unroll
  for (int nt = 0; nt < D / 8; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.f;

  // K and V tiles each have one buffer, filled by cp.async one phase ahead (FlashAttention-2's
  // order): K of the next tile lands while this tile's softmax and P V run, V of the next while its
  // Q K^T runs. Commit groups in flight: K(t), V(t) at the top of tile t.
  const int n_tiles = (kend + BN - 1) / BN;
  if (n_tiles > 0) {
    stage_rows_async<T, D, LD, BN, kThreadsTc>(k, block_tables, s, w, 0, k_s);
    stage_rows_async<T, D, LD, BN, kThreadsTc>(v, block_tables, s, w, 0, v_s);
  }
  for (int t_i = 0; t_i < n_tiles; ++t_i) {
    const int n0 = t_i * BN;
    async_wait<1>();  // K(t) landed (V(t) may be in flight)
    __syncthreads();

    // S = Q K^T: 8 tiles of 8 keys; B fragments by ldmatrix.x4 of 8 key rows x 32 dims: register q
    // holds key nt * 8 + gid, dims 8q + 2 tig (+1), i.e. (b0, b1) of k-steps 2 k2 and 2 k2 + 1.
    float sc[BN / 8][4];
#pragma unroll
    for (int nt = 0; nt < BN / 8; ++nt) {
      sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.f;
      const T* const kr = k_s + (nt * 8 + (lane & 7)) * LD + (lane >> 3) * 8;
#pragma unroll
      for (int k2 = 0; k2 < D / 32; ++k2) {
        uint32_t b0, b1, b2, b3;
        ldsm_x4<T>(kr + k2 * 32, b0, b1, b2, b3);
        kwiki::mma16816<T>(sc[nt], qa[2 * k2], b0, b1);
        kwiki::mma16816<T>(sc[nt], qa[2 * k2 + 1], b2, b3);
      }
    }
    __syncthreads();  // every warp has read K(t): the next tile's K may overwrite it
    if (t_i + 1 < n_tiles) stage_rows_async<T, D, LD, BN, kThreadsTc>(k, block_tables, s, w, n0 + BN, k_s);
    else async_commit();  // an empty group keeps the count of groups in flight
    // Masks and the online softmax of rows r0 (c0, c1) and r1 (c2, c3).
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = n0 + nt * 8 + tig * 2 + (e & 1);
        const int row = e < 2 ? r0 : r1;
        const bool seen = j < kend && (!s.causal || j <= row + shift);
        sc[nt][e] = seen ? sc[nt][e] * s.scale_log2 : -INFINITY;
        mx[e >> 1] = fmaxf(mx[e >> 1], sc[nt][e]);
      }
    float alpha[2], mref[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      mx[i] = fmaxf(mx[i], kwiki_shfl_xor(mx[i], 1));
      mx[i] = fmaxf(mx[i], kwiki_shfl_xor(mx[i], 2));
      mref[i] = mx[i] == -INFINITY ? 0.f : mx[i];
      alpha[i] = exp2f(m[i] - mref[i]);
      m[i] = mx[i];
      l[i] *= alpha[i];
    }
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt) {
      o[nt][0] *= alpha[0];
      o[nt][1] *= alpha[0];
      o[nt][2] *= alpha[1];
      o[nt][3] *= alpha[1];
    }
#pragma unroll
    for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        sc[nt][e] = exp2f(sc[nt][e] - mref[e >> 1]);
        l[e >> 1] += sc[nt][e];
      }
    async_wait<1>();  // V(t) landed (the next K may be in flight)
    __syncthreads();
    // O += P V: P's accumulators of key tiles 2t, 2t + 1 are the A fragment of keys 16t .. 16t + 15.
#pragma unroll
    for (int t = 0; t < BN / 16; ++t) {
      const uint32_t pa[4] = {pack2<T>(sc[2 * t][0], sc[2 * t][1]), pack2<T>(sc[2 * t][2], sc[2 * t][3]), pack2<T>(sc[2 * t + 1][0], sc[2 * t + 1][1]),
                              pack2<T>(sc[2 * t + 1][2], sc[2 * t + 1][3])};
#pragma unroll
      for (int np = 0; np < D / 16; ++np) {
        uint32_t b0, b1, b2, b3;
        ldsm_x4_trans<T>(v_s + (t * 16 + (lane & 15)) * LD + np * 16 + (lane >> 4) * 8, b0, b1, b2, b3);
        kwiki::mma16816<T>(o[2 * np], pa, b0, b1);
        kwiki::mma16816<T>(o[2 * np + 1], pa, b2, b3);
      }
    }
    __syncthreads();  // every warp has read V(t)
    if (t_i + 1 < n_tiles) stage_rows_async<T, D, LD, BN, kThreadsTc>(v, block_tables, s, w, n0 + BN, v_s);
    else async_commit();
  }

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    l[i] += kwiki_shfl_xor(l[i], 1);
    l[i] += kwiki_shfl_xor(l[i], 2);
  }
  const float inv0 = l[0] > 0.f ? 1.f / l[0] : 0.f, inv1 = l[1] > 0.f ? 1.f / l[1] : 0.f;
  if (r0 < lq) {
    T* const dst = out + (static_cast<long long>(q0 + r0) * s.Hq + h) * D + tig * 2;
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt) *reinterpret_cast<uint32_t*>(dst + nt * 8) = pack2<T>(o[nt][0] * inv0, o[nt][1] * inv0);
  }
  if (r1 < lq) {
    T* const dst = out + (static_cast<long long>(q0 + r1) * s.Hq + h) * D + tig * 2;
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt) *reinterpret_cast<uint32_t*>(dst + nt * 8) = pack2<T>(o[nt][2] * inv1, o[nt][3] * inv1);
  }
}

/// The tensor-core launch, or -1 where it does not apply here (a device or binary older than sm_80).
template <typename T, int D>
inline int launch_tc(const T* q, const T* k, const T* v, const int* cu_q, const int* kv_lens, const int* bt, T* out, Shape s, long long max_q,
                     kwiki_stream_t stream) {
#ifndef KWIKI_HOST_EMULATION
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, prefill_attention_tc_kernel<T, D>) != cudaSuccess || attr.ptxVersion < 80 || attr.binaryVersion < 80) {
    (void)cudaGetLastError();
    return -1;
  }
#endif
  s.tiles = static_cast<int>((max_q + kBlockMTc - 1) / kBlockMTc);
  const long long blocks = static_cast<long long>(s.tiles) * s.B * s.Hq;
  if (blocks > kMaxBlocks) return -1;
  prefill_attention_tc_kernel<T, D><<<dim3(static_cast<unsigned>(blocks)), dim3(kThreadsTc), 0, stream>>>(q, k, v, cu_q, kv_lens, bt, out, s);
  return kwiki_last_error();
}

}  // namespace tc
#endif  // KWIKI_PLATFORM_CUDA

template <typename T, int D>
inline int launch_d(const T* q, const T* k, const T* v, const int* cu_q, const int* kv_lens, const int* bt, T* out, const Shape& s,
                    long long blocks, kwiki_stream_t stream) {
  prefill_attention_kernel<T, D><<<dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, stream>>>(q, k, v, cu_q, kv_lens, bt, out, s);
  return kwiki_last_error();
}

/// Launches the attention on `stream`, the tensor-core kernel when `tensor_cores` and it applies
/// (16-bit T, D 64 or 128, CUDA sm_80+), else the CUDA-core one; 0, the launch error, or -1 for
/// arguments it cannot serve (see the header comment).
template <typename T>
inline int launch_path(const T* q, const T* k, const T* v, const int* cu_q, const int* kv_lens, T* out, const int* bt, long long B, long long Hq,
                       long long Hkv, long long D, long long Tq, long long Tk, long long max_q, long long causal, long long layout, long long P,
                       long long MB, float scale, bool tensor_cores, kwiki_stream_t stream) {
  constexpr long long kMaxInt = 2147483647ll;
  if (B < 0 || B > kMaxInt - 1 || Hkv < 1 || Hq < Hkv || Hq % Hkv != 0 || Hq > 65535 || (D != 64 && D != 128 && D != 256)) return -1;
  if (Tq < 0 || Tq > kMaxInt || Tk < 0 || max_q < 0 || (causal != 0 && causal != 1) || (layout != 0 && layout != 1)) return -1;
  if (layout == 1 && (bt == nullptr || P < 1 || MB < 1 || MB * P > kMaxInt || Tk % P != 0)) return -1;
  if ((layout == 0 && Tk > kMaxInt) || Tk > (1ll << 62) / (Hkv * D)) return -1;  // key rows in int, element offsets in 64 bits
  if (B == 0 || Tq == 0 || max_q == 0) return 0;
  if (q == nullptr || k == nullptr || v == nullptr || cu_q == nullptr || kv_lens == nullptr || out == nullptr) return -1;
  if (!kwiki::aligned16(q) || !kwiki::aligned16(k) || !kwiki::aligned16(v) || !kwiki::aligned16(out)) return -1;
  const long long tiles = ((max_q < Tq ? max_q : Tq) + kBlockM - 1) / kBlockM;  // no sequence has more than Tq rows
  const long long blocks = tiles * B * Hq;
  if (tiles < 1 || blocks > kMaxBlocks) return -1;
  const Shape s{static_cast<int>(B), static_cast<int>(Hq), static_cast<int>(Hkv), static_cast<int>(Tq), static_cast<int>(causal),
                static_cast<int>(layout), static_cast<int>(layout == 1 ? P : 1), static_cast<int>(layout == 1 ? MB : 1), static_cast<int>(tiles),
                Tk, scale * 1.4426950408889634f};
#if KWIKI_PLATFORM_CUDA
  if constexpr (!std::is_same<T, float>::value) {
    if (tensor_cores && (D == 64 || D == 128)) {
      const long long mq = max_q < Tq ? max_q : Tq;
      const int r = D == 64 ? tc::launch_tc<T, 64>(q, k, v, cu_q, kv_lens, bt, out, s, mq, stream)
                            : tc::launch_tc<T, 128>(q, k, v, cu_q, kv_lens, bt, out, s, mq, stream);
      if (r != -1) return r;
    }
  }
#else
  (void)tensor_cores;
#endif
  if (D == 64) return launch_d<T, 64>(q, k, v, cu_q, kv_lens, bt, out, s, blocks, stream);
  if (D == 128) return launch_d<T, 128>(q, k, v, cu_q, kv_lens, bt, out, s, blocks, stream);
  return launch_d<T, 256>(q, k, v, cu_q, kv_lens, bt, out, s, blocks, stream);
}

/// Launches the attention on `stream` (the tensor-core kernel where KWIKI_PREFILL_TENSOR_CORES is 1
/// and it applies); 0, the launch error, or -1 for arguments it cannot serve (see the header comment).
template <typename T>
inline int launch(const T* q, const T* k, const T* v, const int* cu_q, const int* kv_lens, T* out, const int* bt, long long B, long long Hq,
                  long long Hkv, long long D, long long Tq, long long Tk, long long max_q, long long causal, long long layout, long long P,
                  long long MB, float scale, kwiki_stream_t stream) {
  return launch_path<T>(q, k, v, cu_q, kv_lens, out, bt, B, Hq, Hkv, D, Tq, Tk, max_q, causal, layout, P, MB, scale, KWIKI_PREFILL_TENSOR_CORES != 0,
                        stream);
}

}  // namespace kwiki_prefill_attention

#ifdef KWIKI_DEFINE_LAUNCHER
KWIKI_EXPORT int kwiki_abi_version(void) { return 1; }

KWIKI_EXPORT int kwiki_launch(void* const* tensors, int num_tensors, const long long* dims, int num_dims, const double* params,
                              int num_params, void* stream) {
  if (tensors == nullptr || dims == nullptr || params == nullptr || num_tensors != 7 || num_dims != 11 || num_params < 1) return -1;
  return kwiki_prefill_attention::launch<KWIKI_T>(
      static_cast<const KWIKI_T*>(tensors[0]), static_cast<const KWIKI_T*>(tensors[1]), static_cast<const KWIKI_T*>(tensors[2]),
      static_cast<const int*>(tensors[3]), static_cast<const int*>(tensors[4]), static_cast<KWIKI_T*>(tensors[5]), static_cast<const int*>(tensors[6]),
      dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], dims[6], dims[7], dims[8], dims[9], dims[10], static_cast<float>(params[0]),
      static_cast<kwiki_stream_t>(stream));
}
#endif  // KWIKI_DEFINE_LAUNCHER

#endif  // KWIKI_PREFILL_ATTENTION_CUH
