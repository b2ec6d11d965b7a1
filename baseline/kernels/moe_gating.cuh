// moe_gating.cuh: kwiki V0 template, MoE router: softmax over experts, then top-k
// (vLLM topk_softmax semantics).
//
//   probs[t, :]       = softmax(gating[t, :])                    fp32
//   topk_weights[t, :] = the k largest probs, descending            fp32
//   topk_ids[t, :]     = their expert ids (ties: the lower id first) int32
//   if renormalize: topk_weights[t, :] /= sum(topk_weights[t, :])
//
// ABI (ABI.md): tensors gating[T,E] (fp32), topk_weights[T,k] (fp32), topk_ids[T,k] (int32);
// dims T, E, k; params renormalize (0/1). The gating tensor is fp32 whatever KWIKI_T is.
//
// Design: one warp (wavefront on CDNA) per token, 4 warps per block. Each lane holds slots of
// 4 consecutive experts loaded with one 16-byte load (E a multiple of 4), else slots of one
// expert; consecutive lanes hold consecutive slots (coalesced), at most 16 experts a lane. The
// softmax is a warp max, exponentials and a warp sum, in fp32. Then k rounds of a warp argmax:
// each lane's best (prob, id) among its unselected experts, then a butterfly that keeps the
// larger prob, and on equal probs the lower id; the winner is removed and lane `round` keeps
// it, so lanes 0..k-1 write the k results (k <= warp size) in one coalesced store. On CUDA, when
// a lane holds at most 4 experts (E <= 128 on the vector path), the lane sorts its experts once
// and each round is two redux.sync over the lanes' heads (top_k_sorted), the same order and
// values in about a quarter of the instructions.
#ifndef KWIKI_MOE_GATING_CUH
#define KWIKI_MOE_GATING_CUH

#include "kwiki_compat.cuh"

namespace kwiki_moe_gating {

constexpr int kWarpsPerBlock = 4;

/// True when (v1, i1) ranks before (v2, i2): larger value, then lower id.
KWIKI_DEVICE bool better(float v1, int i1, float v2, int i2) { return v1 > v2 || (v1 == v2 && i1 < i2); }

/// One token's logits, held as in moe_gating_kernel (slot i of lane l: experts (l + i * warp) *
/// W + c; -inf past E), turned in place into softmax probabilities: a warp max, exponentials and
/// a warp sum in fp32, then p / sum; slots past E become -inf ("not an expert").
template <int W, int NV>
KWIKI_DEVICE void to_probabilities(float (&p)[NV][W], int lane, int E) {
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < NV; ++i)
#pragma unroll
    for (int c = 0; c < W; ++c) m = fmaxf(m, p[i][c]);
  m = kwiki::warp_reduce_max(m);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < NV; ++i) {
    const bool valid = (lane + i * KWIKI_WARP_SIZE) * W < E;
#pragma unroll
    for (int c = 0; c < W; ++c) {
      p[i][c] = valid ? expf(p[i][c] - m) : 0.f;
      s += p[i][c];
    }
  }
  s = kwiki::warp_reduce_sum(s);
#pragma unroll
  for (int i = 0; i < NV; ++i) {
    const bool valid = (lane + i * KWIKI_WARP_SIZE) * W < E;
    // Probabilities are >= 0; -inf marks "not an expert" and, in the top-k, "already selected".
#pragma unroll
    for (int c = 0; c < W; ++c) p[i][c] = valid ? p[i][c] / s : -INFINITY;
  }
}

#if KWIKI_PLATFORM_CUDA
/// A probability and its expert id as one 64-bit rank key: the probability's bits plus one in the
/// high word (probabilities are >= 0, so their bits order as their values; 0 = not an expert or
/// already taken; a NaN ranks above every number, as in torch.topk), the id's complement in the
/// low word, so a larger key is a larger probability and, between equal ones, the lower id.
KWIKI_DEVICE unsigned long long rank_key(float p, int id) {
  const unsigned int hi = (p >= 0.f || p != p) ? __float_as_uint(p) + 1u : 0u;
  return (static_cast<unsigned long long>(hi) << 32) | static_cast<unsigned int>(~id);
}

/// Orders two keys, the larger first.
KWIKI_DEVICE void order_pair(unsigned long long& a, unsigned long long& b) {
  const unsigned long long lo = a < b ? a : b;
  a = a < b ? b : a;
  b = lo;
}

/// Top-k when a lane holds at most 4 experts (E <= 4 x warp on the vector path): the lane's keys
/// sorted once (at most 5 compare-exchanges), then each round takes the largest head in the warp
/// with two redux.sync (the probability word, then the id word among the lanes holding that
/// probability), and only the winning lane shifts its list. About 17 instructions a round where
/// a scan of the lane's experts and a five-step shuffle argmax take about 65 (ncu on the H200: 741
/// warp instructions a token for 128 experts, top 8, at 0.70 issued a scheduler cycle).
template <int W, int NV>
KWIKI_DEVICE void top_k_sorted(const float (&p)[NV][W], int lane, int k, float& my_w, int& my_id, float& wsum) {
  constexpr int L = NV * W;
  static_assert(L >= 1 && L <= 4, "at most 4 experts a lane");
  unsigned long long key[L];
#pragma unroll
  for (int i = 0; i < NV; ++i)
#pragma unroll
    for (int c = 0; c < W; ++c) key[i * W + c] = rank_key(p[i][c], (lane + i * KWIKI_WARP_SIZE) * W + c);
  if constexpr (L >= 2) order_pair(key[0], key[1]);
  if constexpr (L == 3) {
    order_pair(key[1], key[2]);
    order_pair(key[0], key[1]);
  }
  if constexpr (L == 4) {
    order_pair(key[2], key[3]);
    order_pair(key[0], key[2]);
    order_pair(key[1], key[3]);
    order_pair(key[1], key[2]);
  }
  for (int round = 0; round < k; ++round) {
    const unsigned int hi = static_cast<unsigned int>(key[0] >> 32);
    const unsigned int best_hi = __reduce_max_sync(0xffffffffu, hi);
    const unsigned int lo = static_cast<unsigned int>(key[0]);
    const unsigned int best_lo = __reduce_max_sync(0xffffffffu, hi == best_hi ? lo : 0u);
    if (hi == best_hi && lo == best_lo) {  // the winner: its next key moves up
#pragma unroll
      for (int j = 0; j + 1 < L; ++j) key[j] = key[j + 1];
      key[L - 1] = 0;
    }
    const float v = __uint_as_float(best_hi - 1u);
    if (lane == round) {
      my_w = v;
      my_id = static_cast<int>(~best_lo);
    }
    wsum += v;
  }
}
#endif

/// Top-k by k rounds of a warp argmax: each lane's best (prob, id) among its unselected experts,
/// then a shuffle butterfly that keeps the larger prob and, on equal probs, the lower id; the
/// winner is removed and lane `round` keeps it. Any layout, any platform.
template <int W, int NV>
KWIKI_DEVICE void top_k_scan(float (&p)[NV][W], int lane, int k, float& my_w, int& my_id, float& wsum) {
  for (int round = 0; round < k; ++round) {
    // This lane's best, walked in increasing id order: strict '>' keeps the lower id on ties.
    float bv = -INFINITY;
    int bi = INT_MAX;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
#pragma unroll
      for (int c = 0; c < W; ++c) {
        if (p[i][c] > bv) {
          bv = p[i][c];
          bi = (lane + i * KWIKI_WARP_SIZE) * W + c;
        }
      }
    }
    // Warp argmax; `better` is a strict total order on (value, id), so every lane ends
    // with the same winner.
#pragma unroll
    for (int offset = KWIKI_WARP_SIZE / 2; offset > 0; offset >>= 1) {
      const float ov = kwiki_shfl_xor(bv, offset);
      const int oi = kwiki_shfl_xor(bi, offset);
      if (better(ov, oi, bv, bi)) {
        bv = ov;
        bi = oi;
      }
    }
#pragma unroll
    for (int i = 0; i < NV; ++i) {
#pragma unroll
      for (int c = 0; c < W; ++c)
        if ((lane + i * KWIKI_WARP_SIZE) * W + c == bi) p[i][c] = -INFINITY;
    }
    if (lane == round) {
      my_w = bv;
      my_id = bi;
    }
    wsum += bv;
  }
}

/// The token's top-k into lane `round`'s (my_w, my_id) and their sum: sorted heads on CUDA
/// when a lane holds at most 4 experts, else the scan.
template <int W, int NV>
KWIKI_DEVICE void top_k(float (&p)[NV][W], int lane, int k, float& my_w, int& my_id, float& wsum) {
#if KWIKI_PLATFORM_CUDA
  if constexpr (NV * W <= 4) {
    top_k_sorted<W, NV>(p, lane, k, my_w, my_id, wsum);
    return;
  }
#endif
  top_k_scan<W, NV>(p, lane, k, my_w, my_id, wsum);
}

/// One warp per token. Each lane holds NV slots of W consecutive experts: slot i of lane l
/// holds experts (l + i * warp) * W + c, c < W (one 16-byte load per slot when W = 4), so a
/// lane's experts, walked slot by slot, come in increasing id order. E <= NV * warp * W.
template <int W, int NV>
KWIKI_GLOBAL void __launch_bounds__(kWarpsPerBlock * KWIKI_WARP_SIZE)
moe_gating_kernel(const float* __restrict__ gating, float* __restrict__ topk_weights, int* __restrict__ topk_ids, long long T, int E,
                  int k, int renormalize) {
  const int lane = threadIdx.x % KWIKI_WARP_SIZE;
  const long long warps_per_block = blockDim.x / KWIKI_WARP_SIZE;
  for (long long t = blockIdx.x * warps_per_block + threadIdx.x / KWIKI_WARP_SIZE; t < T; t += gridDim.x * warps_per_block) {
    const float* g = gating + t * E;
    float p[NV][W];
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      const int e0 = (lane + i * KWIKI_WARP_SIZE) * W;  // W divides E on the vector path
      if (e0 < E) {
        if constexpr (W == 4) {
          const float4 f = *reinterpret_cast<const float4*>(g + e0);
          p[i][0] = f.x;
          p[i][1] = f.y;
          p[i][2] = f.z;
          p[i][3] = f.w;
        } else {
          p[i][0] = g[e0];
        }
      } else {
#pragma unroll
        for (int c = 0; c < W; ++c) p[i][c] = -INFINITY;
      }
    }
    to_probabilities<W, NV>(p, lane, E);

    float my_w = 0.f;
    int my_id = 0;
    float wsum = 0.f;
    top_k<W, NV>(p, lane, k, my_w, my_id, wsum);
    if (lane < k) {
      topk_weights[t * k + lane] = renormalize ? my_w / wsum : my_w;
      topk_ids[t * k + lane] = my_id;
    }
  }
}

template <int W, int NV>
inline void launch_nv(const float* gating, float* topk_weights, int* topk_ids, long long T, int E, int k, int renormalize, dim3 grid,
                      dim3 block, kwiki_stream_t stream) {
  moe_gating_kernel<W, NV><<<grid, block, 0, stream>>>(gating, topk_weights, topk_ids, T, E, k, renormalize);
}

/// Launches the router on `stream`; 0, the launch error, or -1 for sizes it cannot serve
/// (E > 16 x warp size, k < 1, k > E or k > warp size).
inline int launch(const float* gating, float* topk_weights, int* topk_ids, long long T, long long E, long long k, bool renormalize,
                  kwiki_stream_t stream) {
  constexpr long long kMaxExperts = 16ll * KWIKI_WARP_SIZE;  // 16 registers of experts per lane
  if (T < 0 || E < 1 || k < 1 || k > E || k > KWIKI_WARP_SIZE || E > kMaxExperts) return -1;
  if (T == 0) return 0;
  long long grid_x = kwiki::ceil_div(T, kWarpsPerBlock);
  if (grid_x > kwiki::kMaxGrid) grid_x = kwiki::kMaxGrid;
  const dim3 grid(static_cast<unsigned>(grid_x));
  const dim3 block(kWarpsPerBlock * KWIKI_WARP_SIZE);
  const int e = static_cast<int>(E);
  const int kk = static_cast<int>(k);
  const int rn = renormalize ? 1 : 0;
  const long long lanes = KWIKI_WARP_SIZE;
  if (E % 4 == 0 && kwiki::aligned16(gating)) {  // every token row starts 16-byte aligned
    if (E <= 4 * lanes) launch_nv<4, 1>(gating, topk_weights, topk_ids, T, e, kk, rn, grid, block, stream);
    else if (E <= 8 * lanes) launch_nv<4, 2>(gating, topk_weights, topk_ids, T, e, kk, rn, grid, block, stream);
    else launch_nv<4, 4>(gating, topk_weights, topk_ids, T, e, kk, rn, grid, block, stream);
  } else {
    if (E <= lanes) launch_nv<1, 1>(gating, topk_weights, topk_ids, T, e, kk, rn, grid, block, stream);
    else if (E <= 2 * lanes) launch_nv<1, 2>(gating, topk_weights, topk_ids, T, e, kk, rn, grid, block, stream);
    else if (E <= 4 * lanes) launch_nv<1, 4>(gating, topk_weights, topk_ids, T, e, kk, rn, grid, block, stream);
    else if (E <= 8 * lanes) launch_nv<1, 8>(gating, topk_weights, topk_ids, T, e, kk, rn, grid, block, stream);
    else launch_nv<1, 16>(gating, topk_weights, topk_ids, T, e, kk, rn, grid, block, stream);
  }
  return kwiki_last_error();
}

}  // namespace kwiki_moe_gating

#ifdef KWIKI_DEFINE_LAUNCHER
// KWIKI_T is not used (the router is fp32 in and out); accepted for a uniform build.
KWIKI_EXPORT int kwiki_abi_version(void) { return 1; }

KWIKI_EXPORT int kwiki_launch(void* const* tensors, int num_tensors, const long long* dims, int num_dims, const double* params,
                              int num_params, void* stream) {
  if (tensors == nullptr || dims == nullptr || num_tensors != 3 || num_dims != 3 || num_params < 1 || params == nullptr) return -1;
  if (tensors[0] == nullptr || tensors[1] == nullptr || tensors[2] == nullptr) return -1;
  return kwiki_moe_gating::launch(static_cast<const float*>(tensors[0]), static_cast<float*>(tensors[1]), static_cast<int*>(tensors[2]),
                                  dims[0], dims[1], dims[2], params[0] != 0.0, static_cast<kwiki_stream_t>(stream));
}
#endif  // KWIKI_DEFINE_LAUNCHER

#endif  // KWIKI_MOE_GATING_CUH
