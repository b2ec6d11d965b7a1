// kwiki V0 template: paged_decode_attention -- GQA decode attention over a paged KV cache,
// split-KV (flash-decoding).
//
// Launcher ABI (ABI.md, version 1), pattern "paged_decode_attention":
//   tensors: query[B,Hq,D], key_cache[NB,P,Hkv,D], value_cache[NB,P,Hkv,D], block_tables[B,MB] (int32),
//            seq_lens[B] (int32), out[B,Hq,D], partial_out[B,Hq,S,D] (fp32), partial_lse[B,Hq,S] (fp32)
//   dims:    B, Hq, Hkv, D, P, MB, S (number of KV splits, chosen by the caller)
//   params:  scale
// Token t of sequence b is row (block_tables[b, t / P], t % P) of the caches; query head h reads
// KV head h / (Hq / Hkv); positions >= seq_lens[b] are ignored.
// Numerics: q.k, softmax statistics (running max / sum) and P.V all in fp32; one rounding at the
// store of out.
//
// Kernel 1 (pda_split_kernel): one block per (split, KV head [, chunk of 8 query heads when
// G = Hq / Hkv > 8], sequence); 4 warps (128 threads on CUDA, 256 on HIP). The block serves all
// G query heads of its KV head, so every K/V byte of its slice is read once. Split s of a
// sequence of length L covers tokens [s * per, min(L, (s + 1) * per)), per = ceil(L / S) rounded
// up to the token chunk. Each K/V row (D elements) is read by D / VE lanes with 16-byte loads
// (VE = 16 / sizeof(T)); a warp covers WARP / (D / VE) rows per load, and every lane keeps TPL
// rows of K and of V in flight per step (a whole 16-token page per warp-step for D = 128 bf16 on
// CUDA). Scores are reduced across the lanes of a row with butterflies, each row group keeps its
// own online-softmax state (log2 domain: q is pre-scaled by scale * log2(e)), and the row groups,
// then the warps, are merged at the end (shuffles, then shared memory). The block writes
// partial_out[b, h, s, :] and partial_lse[b, h, s] (natural log); an empty split writes zeros
// and lse = -inf. With S == 1 kernel 1 writes out directly and kernel 2 is not launched.
// Kernel 1, tensor-core form (pda_mma_kernel; CUDA only, taken where it applies: sm_80+, T bf16
// or fp16, D 64 or 128, G <= 8, P a power of two >= 16; otherwise the kernel above): the same
// grid, splits and outputs, with the K/V chunks staged in shared memory by cp.async (a ring of
// kStages chunks per warp) and both products on mma.sync; see its comment below. It moves the
// B32 ctx16384 sample from 975 us to 499-511 us on the H200 (bench/gpu/decode_kernel_bench.cu,
// log bench/results/decode_kernel_bench-h200.txt) and wants about one block per SM, not 16
// (baseline/harness/kernel_shim.py picks the split count by kernel).
// Kernel 2 (pda_merge_kernel): one block per (query head, sequence) merges the S partials with
// their log-sum-exp weights and rounds to T once.
//
// Supported: D in {64, 128, 256} (when D / VE <= the warp width), P a power of two that is a
// multiple of the rows a warp loads at once (P = 16: always), 16-byte aligned query / caches.
// Anything else returns -1.
#ifndef KWIKI_PAGED_DECODE_ATTENTION_CUH
#define KWIKI_PAGED_DECODE_ATTENTION_CUH

#include "kwiki_compat.cuh"  // platform headers, KWIKI_WARP_SIZE, kwiki_shfl_xor, KWIKI_EXPORT, ...

#include <math.h>
#include <stdint.h>
#include <type_traits>

namespace kwiki_pda_detail {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * KWIKI_WARP_SIZE;  // 128 on CUDA, 256 on CDNA
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// ---------------------------------------------------------------------------------------------
// Element traits: 16 bytes of T -> VE fp32 values; one rounding back to T.
// ---------------------------------------------------------------------------------------------
template <typename T>
KWIKI_DEVICE void unpack16(const uint4& u, float* f) {
  if constexpr (std::is_same<T, float>::value) {
    f[0] = __uint_as_float(u.x); f[1] = __uint_as_float(u.y);
    f[2] = __uint_as_float(u.z); f[3] = __uint_as_float(u.w);
  } else if constexpr (std::is_same<T, kwiki_bf16>::value) {
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  } else {
    static_assert(std::is_same<T, kwiki_half>::value, "KWIKI_T must be float, half or bf16");
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      f[2 * i] = __half2float(__ushort_as_half((unsigned short)(w[i] & 0xffffu)));
      f[2 * i + 1] = __half2float(__ushort_as_half((unsigned short)(w[i] >> 16)));
    }
  }
}

// 16-byte K/V load; each byte of the cache is read once, so do not allocate it in L1.
KWIKI_DEVICE uint4 ld_stream16(const void* p) {
#if KWIKI_PLATFORM_HIP
  return *reinterpret_cast<const uint4*>(p);
#else
  uint4 r;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "l"(p));
  return r;
#endif
}

template <typename T, int D, int GP>
struct Cfg {
  static constexpr int WS = KWIKI_WARP_SIZE;
  static constexpr int VE = 16 / (int)sizeof(T);  // elements per 16-byte vector
  static constexpr int LPR = D / VE;              // lanes per K/V row
  static constexpr int RPW = WS / LPR;            // rows a warp loads at once (row groups)
  static constexpr int TPL0 = 16 / RPW;
  // Rows of K (and of V) each lane holds in flight per step; fewer with 8 heads to stay in registers.
  static constexpr int TPL = GP >= 8 ? 4 : (TPL0 > 8 ? 8 : (TPL0 < 2 ? 2 : TPL0));
  static constexpr int CH = RPW * TPL;  // tokens per warp-step
  static constexpr bool kValid = (D % VE == 0) && (LPR <= WS) && (WS % LPR == 0);
};

// ---------------------------------------------------------------------------------------------
// What both split kernels share: the split's token range, where its results go, and the final
// merge of the warps' online-softmax states.
// ---------------------------------------------------------------------------------------------
/// Tokens [ts, te) of split `split` of sequence b: per = ceil(L / S) rounded up to `chunk`.
KWIKI_DEVICE void split_range(const int* __restrict__ seq_lens, int b, int MB, int P, int S, int split, int chunk,
                              int& ts, int& te) {
  int L = seq_lens[b];
  L = L < 0 ? 0 : (L > MB * P ? MB * P : L);
  const int per = ((L + S - 1) / S + chunk - 1) / chunk * chunk;
  ts = split * per;
  te = min(L, ts + per);
}

/// Where a split's result for (query head h0 + g, dim d) goes: out, rounded to T, when S == 1;
/// else partial_out in fp32 and, once per head, its log-sum-exp.
template <typename T, int D>
struct SplitWriter {
  T* out;
  float* partial_out;
  float* partial_lse;
  size_t b_hq;  // b * Hq
  int h0, S, split;
  KWIKI_DEVICE void operator()(int g, int d, float o, float lse) const {
    const size_t bh = b_hq + (h0 + g);
    if (S == 1) {
      out[bh * D + d] = kwiki_from_float<T>(o);
    } else {
      partial_out[(bh * S + split) * D + d] = o;
      if (d == 0) partial_lse[bh * S + split] = lse;
    }
  }
};

/// Merges the kWarps warps' states (log2-domain max m(w, g), sum l(w, g), accumulator acc(w, g, d))
/// for heads g < Gb and writes each (g, d) once; an all-empty head writes 0 and lse = -inf.
template <int D, typename M, typename L, typename A, typename W>
KWIKI_DEVICE void merge_warps_and_write(int Gb, M&& m, L&& l, A&& acc, W&& write) {
  for (int i = threadIdx.x; i < Gb * D; i += kThreads) {
    const int g = i / D, d = i % D;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, m(w, g));
    if (mx == -INFINITY) {
      write(g, d, 0.f, -INFINITY);
      continue;
    }
    float lsum = 0.f, o = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float f = exp2f(m(w, g) - mx);
      lsum = fmaf(l(w, g), f, lsum);
      o = fmaf(acc(w, g, d), f, o);
    }
    write(g, d, o / lsum, (mx + log2f(lsum)) * kLn2);
  }
}

// =============================================================================================
// Kernel 1: one split of one (sequence, KV head, query-head chunk).
// =============================================================================================
template <typename T, int D, int GP>
__global__ void __launch_bounds__(kThreads)
pda_split_kernel(const T* __restrict__ query, const T* __restrict__ key_cache,
                 const T* __restrict__ value_cache, const int* __restrict__ block_tables,
                 const int* __restrict__ seq_lens, T* __restrict__ out, float* __restrict__ partial_out,
                 float* __restrict__ partial_lse, int Hq, int Hkv, int G, int nhc, int P, int logP,
                 int MB, int S, float qscale) {
  using C = Cfg<T, D, GP>;
  constexpr int VE = C::VE, LPR = C::LPR, RPW = C::RPW, TPL = C::TPL, CH = C::CH, WS = C::WS;

  __shared__ float s_acc[kWarps][GP][D];
  __shared__ float s_m[kWarps][GP];
  __shared__ float s_l[kWarps][GP];

  const int split = blockIdx.x;
  const int hkv = blockIdx.y / nhc;
  const int hc = blockIdx.y % nhc;
  const int b = blockIdx.z;
  const int g0 = hc * GP;
  const int Gb = min(GP, G - g0);  // query heads this block serves
  const int h0 = hkv * G + g0;     // first of them

  const int tid = threadIdx.x;
  const int warp = tid / WS, lane = tid % WS;
  const int hr = lane / LPR;        // row group within the warp
  const int d0 = (lane % LPR) * VE;  // this lane's VE dims

  int ts, te;
  split_range(seq_lens, b, MB, P, S, split, CH, ts, te);
  const SplitWriter<T, D> write_result{out, partial_out, partial_lse, (size_t)b * Hq, h0, S, split};

  if (ts >= te) {  // empty split (block-uniform)
    for (int i = tid; i < Gb * D; i += kThreads) write_result(i / D, i % D, 0.f, -INFINITY);
    return;
  }

  // Query, pre-scaled so scores are in the log2 domain.
  float qf[GP][VE];
#pragma unroll
  for (int g = 0; g < GP; ++g) {
    if (g < Gb) {
      const uint4 u = *reinterpret_cast<const uint4*>(query + ((size_t)b * Hq + h0 + g) * D + d0);
      unpack16<T>(u, qf[g]);
#pragma unroll
      for (int e = 0; e < VE; ++e) qf[g][e] *= qscale;
    } else {
#pragma unroll
      for (int e = 0; e < VE; ++e) qf[g][e] = 0.f;
    }
  }

  float m[GP], l[GP], acc[GP][VE];
#pragma unroll
  for (int g = 0; g < GP; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.f;
#pragma unroll
    for (int e = 0; e < VE; ++e) acc[g][e] = 0.f;
  }

  const int* bt_row = block_tables + (size_t)b * MB;
  const size_t row_stride = (size_t)Hkv * D;           // between tokens of a page
  const size_t page_stride = (size_t)P * row_stride;   // between pages
  const T* kbase = key_cache + (size_t)hkv * D + d0;
  const T* vbase = value_cache + (size_t)hkv * D + d0;
  const int nch = (te - ts + CH - 1) / CH;

  // P and CH are powers of two and every chunk starts at a multiple of CH, so with P >= CH a
  // chunk lies in one page: one block-table entry per chunk, fetched one chunk ahead.
  const bool one_page = P >= CH;
  int pg_cur = 0;
  if (one_page && warp < nch) pg_cur = __ldg(bt_row + ((ts + warp * CH) >> logP));

  for (int c = warp; c < nch; c += kWarps) {
    const int t0 = ts + c * CH;
    int pg_next = 0;
    if (one_page && c + kWarps < nch) pg_next = __ldg(bt_row + ((t0 + kWarps * CH) >> logP));
    int page[TPL];  // all block-table reads of the chunk first, then all K/V reads
#pragma unroll
    for (int i = 0; i < TPL; ++i) {
      const int tg = t0 + RPW * i;  // first token of this step's RPW rows (warp-uniform; one page)
      page[i] = pg_cur;
      if (!one_page && tg < te) page[i] = __ldg(bt_row + (tg >> logP));
    }
    uint4 kr[TPL], vr[TPL];
    bool valid[TPL];
#pragma unroll
    for (int i = 0; i < TPL; ++i) {
      const int tg = t0 + RPW * i;
      valid[i] = tg + hr < te;
      const size_t off = (size_t)page[i] * page_stride + (size_t)((tg & (P - 1)) + hr) * row_stride;
      kr[i] = make_uint4(0u, 0u, 0u, 0u);
      vr[i] = make_uint4(0u, 0u, 0u, 0u);
      if (valid[i]) {
        kr[i] = ld_stream16(kbase + off);
        vr[i] = ld_stream16(vbase + off);
      }
    }
    pg_cur = pg_next;

    // Scores s[i][g] = q_g . k_i (log2 domain), reduced over the LPR lanes of a row.
    float sc[TPL][GP];
#pragma unroll
    for (int i = 0; i < TPL; ++i) {
      float kf[VE];
      unpack16<T>(kr[i], kf);
#pragma unroll
      for (int g = 0; g < GP; ++g) {
        float s = 0.f;
#pragma unroll
        for (int e = 0; e < VE; ++e) s = fmaf(qf[g][e], kf[e], s);
        sc[i][g] = s;
      }
    }
#pragma unroll
    for (int i = 0; i < TPL; ++i)
#pragma unroll
      for (int g = 0; g < GP; ++g) {
        float s = sc[i][g];
#pragma unroll
        for (int o = LPR / 2; o > 0; o >>= 1) s += kwiki_shfl_xor(s, o);
        sc[i][g] = valid[i] ? s : -INFINITY;
      }

    // Online softmax update of this row group's state.
    float mref[GP];
#pragma unroll
    for (int g = 0; g < GP; ++g) {
      float cm = sc[0][g];
#pragma unroll
      for (int i = 1; i < TPL; ++i) cm = fmaxf(cm, sc[i][g]);
      const float mn = fmaxf(m[g], cm);
      mref[g] = mn == -INFINITY ? 0.f : mn;  // nothing seen yet: keep exp2 finite (all p = 0)
      const float alpha = exp2f(m[g] - mref[g]);
      l[g] *= alpha;
#pragma unroll
      for (int e = 0; e < VE; ++e) acc[g][e] *= alpha;
      m[g] = mn;
    }
#pragma unroll
    for (int i = 0; i < TPL; ++i) {
      float vf[VE];
      unpack16<T>(vr[i], vf);
#pragma unroll
      for (int g = 0; g < GP; ++g) {
        const float p = exp2f(sc[i][g] - mref[g]);
        l[g] += p;
#pragma unroll
        for (int e = 0; e < VE; ++e) acc[g][e] = fmaf(p, vf[e], acc[g][e]);
      }
    }
  }

  // Merge the row groups of the warp (lanes that hold the same dims, LPR apart).
#pragma unroll
  for (int o = LPR; o < WS; o <<= 1) {
#pragma unroll
    for (int g = 0; g < GP; ++g) {
      const float mo = kwiki_shfl_xor(m[g], o);
      const float lo = kwiki_shfl_xor(l[g], o);
      const float mn = fmaxf(m[g], mo);
      const float r = mn == -INFINITY ? 0.f : mn;
      const float a = exp2f(m[g] - r), bo = exp2f(mo - r);
      l[g] = l[g] * a + lo * bo;
#pragma unroll
      for (int e = 0; e < VE; ++e) {
        const float ao = kwiki_shfl_xor(acc[g][e], o);
        acc[g][e] = acc[g][e] * a + ao * bo;
      }
      m[g] = mn;
    }
  }
  if (lane < LPR) {
#pragma unroll
    for (int g = 0; g < GP; ++g)
#pragma unroll
      for (int e = 0; e < VE; ++e) s_acc[warp][g][d0 + e] = acc[g][e];
  }
  if (lane == 0) {
#pragma unroll
    for (int g = 0; g < GP; ++g) {
      s_m[warp][g] = m[g];
      s_l[warp][g] = l[g];
    }
  }
  __syncthreads();

  // Merge the warps and write.
  merge_warps_and_write<D>(
      Gb, [&](int w, int g) { return s_m[w][g]; }, [&](int w, int g) { return s_l[w][g]; },
      [&](int w, int g, int d) { return s_acc[w][g][d]; }, write_result);
}

// =============================================================================================
// Kernel 2: out[b, h, :] = sum_s exp(lse_s - max) * partial_out[b, h, s, :] / sum_s exp(lse_s - max)
// =============================================================================================
template <typename T>
__global__ void __launch_bounds__(kThreads)
pda_merge_kernel(const float* __restrict__ partial_out, const float* __restrict__ partial_lse,
                 T* __restrict__ out, int Hq, int D, int S) {
  const int h = blockIdx.x, b = blockIdx.y;
  const size_t bh = (size_t)b * Hq + h;
  const float* lse = partial_lse + bh * S;
  const float* po = partial_out + bh * S * D;

  float M = -INFINITY;
  for (int s = 0; s < S; ++s) M = fmaxf(M, lse[s]);
  for (int d = threadIdx.x; d < D; d += kThreads) {
    float o = 0.f;
    if (M != -INFINITY) {
      float den = 0.f, num = 0.f;
      for (int s = 0; s < S; ++s) {
        const float w = expf(lse[s] - M);
        den += w;
        num = fmaf(w, po[(size_t)s * D + d], num);
      }
      o = num / den;
    }
    out[bh * D + d] = kwiki_from_float<T>(o);
  }
}

// =============================================================================================
// Kernel 1, tensor-core path (CUDA, sm_80+; 16-bit T, D in {64, 128}, G <= 8, P a multiple of
// 16). Same grid, split bounds, statistics and outputs as pda_split_kernel; the block's 4 warps
// take the split's 16-token chunks in turn (chunk c to warp c % 4), each warp through its own
// ring of NST shared-memory stages filled by cp.async (16-byte pieces, zero-filled past the
// sequence end), so NST - 1 chunks of K and V (NST - 1 times 4 KB for D = 128) stay in flight
// per warp without holding registers. Per chunk, as FlashAttention-2 does it: S = Q K^T by
// mma.sync m16n8k16 (A = the G query heads as rows 0..7 of 16, from registers; B = K through
// ldmatrix), online softmax on the accumulator fragments in fp32, O += P V by mma.sync (B = V
// through ldmatrix.trans). P is fed to the second product as two 16-bit terms, hi = T(p) and
// lo = T(p - hi) (about 16 significant bits), so the products and the fp32 accumulation keep
// the generic kernel's accuracy instead of rounding p to T. Rows of a chunk are placed with
// 16-byte XOR swizzle (piece c of row r at c ^ (r & 7)): ldmatrix reads are conflict free.
// =============================================================================================
#if KWIKI_PLATFORM_CUDA
namespace mma_path {

constexpr int kChunk = 16;  // tokens per chunk (one mma N tile pair / K step)

KWIKI_DEVICE uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

KWIKI_DEVICE void cp_async16(uint32_t dst, const void* src, bool fill) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(fill ? 16 : 0) : "memory");
}
KWIKI_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
KWIKI_DEVICE void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

KWIKI_DEVICE void ldsm_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr) : "memory");
}
KWIKI_DEVICE void ldsm_x4_t(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr) : "memory");
}

// D(16x8, fp32) = A(16x16) B(16x8) + C, with A's rows 8..15 and C's rows 8..15 zero: only the
// fragment's rows 0..7 (c0, c1) are kept.
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

template <int D>
struct Shape {
  static constexpr int CHK = D / 8;                  // 16-byte pieces per K/V row
  static constexpr int ROWB = D * 2;                 // bytes per row
  static constexpr int STAGE = 2 * kChunk * ROWB;    // K then V of one chunk
  static constexpr int PIECES = kChunk * CHK / 32;   // pieces per lane per tensor and chunk
};

template <typename T, int D, int NST>
__global__ void __launch_bounds__(kThreads)
pda_mma_kernel(const T* __restrict__ query, const T* __restrict__ key_cache, const T* __restrict__ value_cache,
               const int* __restrict__ block_tables, const int* __restrict__ seq_lens, T* __restrict__ out,
               float* __restrict__ partial_out, float* __restrict__ partial_lse, int Hq, int Hkv, int G, int P,
               int logP, int MB, int S, float qscale) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  using Sh = Shape<D>;
  constexpr int CHK = Sh::CHK, ROWB = Sh::ROWB, STAGE = Sh::STAGE;
  extern __shared__ __align__(128) unsigned char pda_smem[];
  __shared__ float s_m[kWarps][8];
  __shared__ float s_l[kWarps][8];

  const int split = blockIdx.x, hkv = blockIdx.y, b = blockIdx.z;
  const int h0 = hkv * G;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int gid = lane >> 2, tig = lane & 3;  // mma fragment row (query head) and column pair

  int ts, te;
  split_range(seq_lens, b, MB, P, S, split, kChunk, ts, te);
  const SplitWriter<T, D> write_result{out, partial_out, partial_lse, (size_t)b * Hq, h0, S, split};
  if (ts >= te) {  // empty split (block-uniform)
    for (int i = tid; i < G * D; i += kThreads) write_result(i / D, i % D, 0.f, -INFINITY);
    return;
  }

  // A fragments of Q (rows = query heads; rows >= G and 8..15 are zero), unscaled: the scale is
  // applied to the fp32 scores.
  uint32_t qa[D / 16][2];
  {
    const bool row = gid < G;
    const T* qp = query + ((size_t)b * Hq + h0 + (row ? gid : 0)) * D + tig * 2;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      qa[kk][0] = row ? *reinterpret_cast<const uint32_t*>(qp + kk * 16) : 0u;
      qa[kk][1] = row ? *reinterpret_cast<const uint32_t*>(qp + kk * 16 + 8) : 0u;
    }
  }

  const int nch = (te - ts + kChunk - 1) / kChunk;
  const int mine = warp < nch ? (nch - 1 - warp) / kWarps + 1 : 0;  // chunks warp, warp + 4, ...
  const int* bt_row = block_tables + (size_t)b * MB;
  const size_t row_stride = (size_t)Hkv * D;
  const size_t page_stride = (size_t)P * row_stride;
  const T* kbase = key_cache + (size_t)hkv * D;
  const T* vbase = value_cache + (size_t)hkv * D;
  const uint32_t ring = smem_u32(pda_smem) + (uint32_t)(warp * NST * STAGE);

  auto chunk_tok = [&](int i) { return ts + (warp + i * kWarps) * kChunk; };
  auto page_of = [&](int i) { return __ldg(bt_row + (chunk_tok(i) >> logP)); };
  // cp.async of my i-th chunk (K and V rows of 16 tokens of one page) into stage i % NST.
  auto issue = [&](int i, int page) {
    const int t0 = chunk_tok(i);
    const size_t off0 = (size_t)page * page_stride + (size_t)(t0 & (P - 1)) * row_stride;
    const uint32_t st = ring + (uint32_t)((i % NST) * STAGE);
#pragma unroll
    for (int j = 0; j < Sh::PIECES; ++j) {
      const int piece = lane + 32 * j;
      const int r = piece / CHK, c = piece % CHK;
      const bool ok = t0 + r < te;
      const size_t off = off0 + (size_t)(ok ? r : 0) * row_stride + c * 8;
      const uint32_t dst = st + (uint32_t)(r * ROWB + ((c ^ (r & 7)) << 4));
      cp_async16(dst, kbase + off, ok);
      cp_async16(dst + kChunk * ROWB, vbase + off, ok);
    }
  };

  float m = -INFINITY, l = 0.f;  // state of query head gid (log2 domain); l: this lane's part
  float acc[D / 8][2];            // O[gid][nt * 8 + 2 * tig + {0, 1}]
#pragma unroll
  for (int nt = 0; nt < D / 8; ++nt) acc[nt][0] = acc[nt][1] = 0.f;

  int pg_ahead = NST - 1 < mine ? page_of(NST - 1) : 0;
#pragma unroll
  for (int i = 0; i < NST - 1; ++i) {
    if (i < mine) issue(i, page_of(i));
    cp_async_commit();
  }
  for (int i = 0; i < mine; ++i) {
    const int ia = i + NST - 1;
    if (ia < mine) issue(ia, pg_ahead);
    cp_async_commit();
    if (ia + 1 < mine) pg_ahead = page_of(ia + 1);
    cp_async_wait<NST - 1>();
    __syncwarp();

    const uint32_t ks = ring + (uint32_t)((i % NST) * STAGE);
    const uint32_t vs = ks + kChunk * ROWB;
    // S = Q K^T: two 8-token tiles.
    float s0[2] = {0.f, 0.f}, s1[2] = {0.f, 0.f};
    {
      const int r = ((lane >> 4) << 3) + (lane & 7);  // token row this lane addresses
      const int half = (lane >> 3) & 1;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t b0, b1, b2, b3;
        ldsm_x4(ks + (uint32_t)(r * ROWB + (((2 * kk + half) ^ (lane & 7)) << 4)), b0, b1, b2, b3);
        mma_top<T>(s0[0], s0[1], qa[kk][0], qa[kk][1], b0, b1);
        mma_top<T>(s1[0], s1[1], qa[kk][0], qa[kk][1], b2, b3);
      }
    }
    // Online softmax for query head gid; this lane holds tokens 2 tig + {0, 1} and 8 + 2 tig + {0, 1}.
    float x[4] = {s0[0] * qscale, s0[1] * qscale, s1[0] * qscale, s1[1] * qscale};
    const int t0 = chunk_tok(i);
    if (t0 + kChunk > te) {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (t0 + (j >> 1) * 8 + 2 * tig + (j & 1) >= te) x[j] = -INFINITY;
    }
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
    // O += P V: pairs of 8-dim tiles; ldmatrix.trans gives the B fragments (token-major V).
    {
      const int r = (((lane >> 3) & 1) << 3) + (lane & 7);
      const int half = lane >> 4;
#pragma unroll
      for (int c = 0; c < D / 16; ++c) {
        uint32_t b0, b1, b2, b3;
        ldsm_x4_t(vs + (uint32_t)(r * ROWB + (((2 * c + half) ^ (lane & 7)) << 4)), b0, b1, b2, b3);
        mma_top<T>(acc[2 * c][0], acc[2 * c][1], h01, h23, b0, b1);
        mma_top<T>(acc[2 * c][0], acc[2 * c][1], l01, l23, b0, b1);
        mma_top<T>(acc[2 * c + 1][0], acc[2 * c + 1][1], h01, h23, b2, b3);
        mma_top<T>(acc[2 * c + 1][0], acc[2 * c + 1][1], l01, l23, b2, b3);
      }
    }
    __syncwarp();  // every lane is done with stage i % NST before it is refilled
  }
  cp_async_wait<0>();
  __syncwarp();

  // The quad's partial sums; then the warps are merged through shared memory (each warp's acc
  // goes into its own, now idle, ring).
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  float* s_acc = reinterpret_cast<float*>(pda_smem + (size_t)warp * NST * STAGE);  // [8][D]
#pragma unroll
  for (int nt = 0; nt < D / 8; ++nt)
    *reinterpret_cast<float2*>(s_acc + gid * D + nt * 8 + 2 * tig) = make_float2(acc[nt][0], acc[nt][1]);
  if (tig == 0) {
    s_m[warp][gid] = m;
    s_l[warp][gid] = l;
  }
  __syncthreads();
  merge_warps_and_write<D>(
      G, [&](int w, int g) { return s_m[w][g]; }, [&](int w, int g) { return s_l[w][g]; },
      [&](int w, int g, int d) { return reinterpret_cast<const float*>(pda_smem + (size_t)w * NST * STAGE)[g * D + d]; },
      write_result);
#endif
}

}  // namespace mma_path
#endif  // KWIKI_PLATFORM_CUDA

// ---------------------------------------------------------------------------------------------
// Host side
// ---------------------------------------------------------------------------------------------
struct Args {
  const void* query;
  const void* key_cache;
  const void* value_cache;
  const int* block_tables;
  const int* seq_lens;
  void* out;
  float* partial_out;
  float* partial_lse;
  int B, Hq, Hkv, D, P, MB, S;
  float scale;
  kwiki_stream_t stream;
  int path = 0;  // 0: the tensor-core kernel where it applies, else the generic one; 1: generic only;
                 // 2: tensor-core only (-1 where it does not apply). For the benches.
};

template <typename T>
inline int launch_merge(const Args& a) {
  if (a.S <= 1) return kwiki_last_error();
  const int e = kwiki_last_error();
  if (e != 0) return e;
  dim3 grid2((unsigned)a.Hq, (unsigned)a.B);
  pda_merge_kernel<T><<<grid2, kThreads, 0, a.stream>>>(a.partial_out, a.partial_lse, static_cast<T*>(a.out), a.Hq,
                                                        a.D, a.S);
  return kwiki_last_error();
}

#if KWIKI_PLATFORM_CUDA
constexpr int kStages = 2;  // cp.async ring depth per warp of the tensor-core kernel (H200: 2 >= 3 > 4)

template <typename T, int D, int NST = kStages>
inline int launch_mma(const Args& a) {
  using namespace mma_path;
  const int G = a.Hq / a.Hkv;
  if (G > 8 || a.P < kChunk || (a.P & (a.P - 1)) != 0 || a.Hkv > 65535 || a.B > 65535) return -1;
  constexpr int smem = kWarps * NST * Shape<D>::STAGE;
  static int ready = 0;  // 1: usable (dynamic shared-memory limit raised), -1: not on this device
  if (ready == 0) {
    int dev = 0, major = 0, optin = 0;
    ready = -1;
    if (cudaGetDevice(&dev) == cudaSuccess &&
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) == cudaSuccess && major >= 8 &&
        optin >= smem + 256 &&
        cudaFuncSetAttribute(pda_mma_kernel<T, D, NST>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) == cudaSuccess)
      ready = 1;
    else
      (void)cudaGetLastError();
  }
  if (ready < 0) return -1;
  int logP = 0;
  while ((1 << logP) < a.P) ++logP;
  dim3 grid((unsigned)a.S, (unsigned)a.Hkv, (unsigned)a.B);
  pda_mma_kernel<T, D, NST><<<grid, kThreads, smem, a.stream>>>(
      static_cast<const T*>(a.query), static_cast<const T*>(a.key_cache), static_cast<const T*>(a.value_cache),
      a.block_tables, a.seq_lens, static_cast<T*>(a.out), a.partial_out, a.partial_lse, a.Hq, a.Hkv, G, a.P, logP,
      a.MB, a.S, a.scale * kLog2e);
  return launch_merge<T>(a);
}
#endif

template <typename T, int D, int GP>
inline int launch_dg(const Args& a) {
  using C = Cfg<T, D, GP>;
  if constexpr (!C::kValid) {
    return -1;
  } else {
    if (a.P <= 0 || (a.P & (a.P - 1)) != 0 || a.P % C::RPW != 0) return -1;
    int logP = 0;
    while ((1 << logP) < a.P) ++logP;
    const int G = a.Hq / a.Hkv;
    const int nhc = (G + GP - 1) / GP;
    if ((long long)a.Hkv * nhc > 65535 || a.B > 65535) return -1;
    dim3 grid((unsigned)a.S, (unsigned)(a.Hkv * nhc), (unsigned)a.B);
    pda_split_kernel<T, D, GP><<<grid, kThreads, 0, a.stream>>>(
        static_cast<const T*>(a.query), static_cast<const T*>(a.key_cache), static_cast<const T*>(a.value_cache),
        a.block_tables, a.seq_lens, static_cast<T*>(a.out), a.partial_out, a.partial_lse, a.Hq, a.Hkv, G, nhc,
        a.P, logP, a.MB, a.S, a.scale * kLog2e);
    return launch_merge<T>(a);
  }
}

template <typename T, int D>
inline int launch_d(const Args& a) {
#if KWIKI_PLATFORM_CUDA
  if constexpr (!std::is_same<T, float>::value && (D == 64 || D == 128)) {
    if (a.path != 1) {
      const int r = launch_mma<T, D>(a);
      if (r != -1 || a.path == 2) return r;
    }
  }
#endif
  if (a.path == 2) return -1;
  const int G = a.Hq / a.Hkv;
  if (G <= 1) return launch_dg<T, D, 1>(a);
  if (G <= 2) return launch_dg<T, D, 2>(a);
  if (G <= 4) return launch_dg<T, D, 4>(a);
  return launch_dg<T, D, 8>(a);  // G > 8: chunks of 8 query heads (grid.y)
}

template <typename T>
inline int launch(const Args& a) {
  if (a.B == 0 || a.Hq == 0) return 0;
  if (a.Hkv <= 0 || a.Hq % a.Hkv != 0 || a.S <= 0 || a.MB < 0) return -1;
  if (!kwiki::aligned16(a.query) || !kwiki::aligned16(a.key_cache) || !kwiki::aligned16(a.value_cache)) return -1;
  if (a.query == nullptr || a.key_cache == nullptr || a.value_cache == nullptr || a.block_tables == nullptr ||
      a.seq_lens == nullptr || a.out == nullptr)
    return -1;
  if (a.S > 1 && (a.partial_out == nullptr || a.partial_lse == nullptr)) return -1;
  switch (a.D) {
    case 64: return launch_d<T, 64>(a);
    case 128: return launch_d<T, 128>(a);
    case 256: return launch_d<T, 256>(a);
    default: return -1;
  }
}

}  // namespace kwiki_pda_detail

#ifdef KWIKI_DEFINE_LAUNCHER
KWIKI_EXPORT int kwiki_abi_version(void) { return 1; }

KWIKI_EXPORT int kwiki_launch(void* const* tensors, int num_tensors, const long long* dims, int num_dims,
                              const double* params, int num_params, void* stream) {
  if (tensors == nullptr || dims == nullptr || num_tensors != 8 || num_dims != 7) return -1;
  for (int i = 0; i < 7; ++i)
    if (dims[i] < 0 || dims[i] > 0x7fffffffLL) return -1;
  kwiki_pda_detail::Args a;
  a.query = tensors[0];
  a.key_cache = tensors[1];
  a.value_cache = tensors[2];
  a.block_tables = static_cast<const int*>(tensors[3]);
  a.seq_lens = static_cast<const int*>(tensors[4]);
  a.out = tensors[5];
  a.partial_out = static_cast<float*>(tensors[6]);
  a.partial_lse = static_cast<float*>(tensors[7]);
  a.B = (int)dims[0];
  a.Hq = (int)dims[1];
  a.Hkv = (int)dims[2];
  a.D = (int)dims[3];
  a.P = (int)dims[4];
  a.MB = (int)dims[5];
  a.S = (int)dims[6];
  if ((long long)a.MB * a.P > 0x7fffffffLL) return -1;
  a.scale = (params != nullptr && num_params >= 1) ? (float)params[0] : (a.D > 0 ? 1.0f / sqrtf((float)a.D) : 1.0f);
  a.stream = static_cast<kwiki_stream_t>(stream);
  return kwiki_pda_detail::launch<KWIKI_T>(a);
}
#endif  // KWIKI_DEFINE_LAUNCHER

#endif  // KWIKI_PAGED_DECODE_ATTENTION_CUH
