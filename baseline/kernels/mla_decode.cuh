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
// Design: grid (S, ceil(H / 16), B), 4 warps a block; a block serves a group of up to 16 query
// heads (their rows in shared memory), so a latent row is read once per head group: once per
// sequence at DeepSeek-V3 with tensor parallel 8 (16 heads a GPU). Scores: a warp per token, the
// row's 16-byte chunks over the lanes against the group's queries; the 16 dot products leave the
// warp by a reduce-scatter butterfly (15 + log2(warp / 16) shuffles, not 16 x 5). The split's
// scores stay in shared memory; a warp per head takes their max and the sum of exponentials.
// Values: thread i owns Dv / threads consecutive dims and walks every token of the split, so a
// row's first Dv dims are read by the block as one contiguous sweep. CUDA cores in V0: FlashMLA's
// tensor-core path (wgmma, both products on 64 x 576 tiles) is the next version. With one split
// the block writes out; otherwise fp32 partials and their log-sum-exp, merged by a second kernel.
#ifndef KWIKI_MLA_DECODE_CUH
#define KWIKI_MLA_DECODE_CUH

#include "kwiki_compat.cuh"

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
