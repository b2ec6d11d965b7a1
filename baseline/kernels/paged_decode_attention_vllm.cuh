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
// Design: grid (S, Hkv, B), 4 warps a block; each block serves every query head of its GQA group,
// so each K/V element is read once. Scores: a warp takes one page slice of min(P, warp) tokens at
// a time; lanes over the slice's tokens, then over the D/X 16-byte groups (a load instruction
// reads whole X-groups of consecutive tokens: coalesced); each lane's partial dot products with
// the group's queries (fp32, in shared memory) are summed over the lanes of its token with a
// butterfly. The split's scores stay in shared memory; one warp per query head takes their max and
// the sum of exponentials. Values: thread i owns rows d = i, i + threads of [D, P] and reads a
// page's P tokens of a row as 16-byte chunks (consecutive threads read consecutive rows). With one
// split the block writes out; otherwise fp32 partials and their log-sum-exp, merged by a second
// kernel.
#ifndef KWIKI_PAGED_DECODE_ATTENTION_VLLM_CUH
#define KWIKI_PAGED_DECODE_ATTENTION_VLLM_CUH

#include "kwiki_compat.cuh"

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

/// out[b, h, :] = sum_s exp(lse_s - LSE) partial_out_s; grid (Hq, B).
template <typename T>
KWIKI_GLOBAL void __launch_bounds__(kThreads, 1)
merge_kernel(const float* __restrict__ partial_out, const float* __restrict__ partial_lse, T* __restrict__ out, int D, int S) {
  const long long h = static_cast<long long>(blockIdx.y) * gridDim.x + blockIdx.x;
  const float* lse = partial_lse + h * S;
  float m = -INFINITY;
  for (int i = 0; i < S; ++i) m = fmaxf(m, lse[i]);
  float total = 0.f;
  for (int i = 0; i < S; ++i) total += m == -INFINITY ? 0.f : expf(lse[i] - m);
  const float inv_total = total > 0.f ? 1.f / total : 0.f;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float acc = 0.f;
    for (int i = 0; i < S; ++i)
      if (lse[i] != -INFINITY) acc += expf(lse[i] - m) * partial_out[(h * S + i) * D + d];
    out[h * D + d] = kwiki_from_float<T>(acc * inv_total);
  }
}

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
  if (D <= kThreads) launch_nd<T, 1>(q, kc, vc, bt, sl, out, po, pl, s, G, shared, stream);
  else launch_nd<T, 2>(q, kc, vc, bt, sl, out, po, pl, s, G, shared, stream);
  if (S > 1) merge_kernel<T><<<dim3(static_cast<unsigned>(Hq), static_cast<unsigned>(B)), kThreads, 0, stream>>>(po, pl, out, static_cast<int>(D),
                                                                                                             static_cast<int>(S));
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
