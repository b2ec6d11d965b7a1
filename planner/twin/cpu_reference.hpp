// cpu_reference.hpp: fp64 CPU references of the kwiki V0 kernel patterns.
//
// Every reference takes float inputs (what the device tensors hold once converted to fp32),
// computes in double and returns double outputs, so a kernel's result can be compared with
// a tolerance against values carrying no rounding of their own. Where a pattern's semantics
// include a rounding the kernel must reproduce (the in-place residual of fused_add_rms_norm,
// the fp32 scale and the fp8 grid of fp8_quant), the reference applies that same rounding.
// Plain C++20, no GPU code. Sizes are checked; a mismatch throws std::invalid_argument.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kwiki::reference {

// ---------------------------------------------------------------------------------------------
// Storage roundings
// ---------------------------------------------------------------------------------------------

/// The element type a tensor is stored in (what a kernel rounds to at a store).
enum class StoreType { kFloat32, kBFloat16, kFloat16 };

/// v rounded to bfloat16 (nearest even; NaN stays NaN, overflow goes to +-inf).
float round_to_bf16(float v);
/// v rounded to IEEE binary16 (nearest even, subnormals kept; overflow goes to +-inf).
float round_to_fp16(float v);
/// v rounded to `type` (identity for kFloat32).
float round_to(StoreType type, float v);

// ---------------------------------------------------------------------------------------------
// FP8 E4M3
// ---------------------------------------------------------------------------------------------

/// Largest finite value: 448 for e4m3fn (OCP, NVIDIA), 240 for e4m3fnuz (AMD CDNA3).
float fp8_max_value(bool fnuz);

/// x rounded to the fp8 E4M3 grid, exactly: round to nearest even, saturating to +-max
/// (+-inf saturate too). e4m3fn: bias 7, smallest subnormal 2^-9, signed zeros kept.
/// e4m3fnuz: bias 8, smallest subnormal 2^-10, no negative zero (anything that rounds to zero
/// is +0). NaN stays NaN.
float fp8_round(float x, bool fnuz);

/// The fp8 byte of x (same rounding as fp8_round). NaN encodes as 0x7f (e4m3fn) or 0x80
/// (e4m3fnuz, its only NaN).
std::uint8_t fp8_encode(float x, bool fnuz);

/// The value of an fp8 byte. e4m3fn: 0x7f and 0xff are NaN, 0x80 is -0. e4m3fnuz: 0x80 is NaN.
float fp8_decode(std::uint8_t byte, bool fnuz);

// ---------------------------------------------------------------------------------------------
// Row patterns ([rows, cols] row-major)
// ---------------------------------------------------------------------------------------------

/// out = x / sqrt(mean(x^2) + eps) * weight, per row.
std::vector<double> rms_norm(const std::vector<float>& x, const std::vector<float>& weight, std::size_t rows, std::size_t cols,
                             double eps);

/// The two results of fused_add_rms_norm.
struct FusedAddRmsNormResult {
  std::vector<double> out;     ///< the normalized rows
  std::vector<float> residual; ///< x + residual, rounded to fp32 then to the residual's store type
};

/// residual' = round(x + residual) (the sum in fp32, then rounded to `residual_type`, as the
/// kernel stores it in place); out = residual' / sqrt(mean(residual'^2) + eps) * weight.
FusedAddRmsNormResult fused_add_rms_norm(const std::vector<float>& x, const std::vector<float>& residual,
                                         const std::vector<float>& weight, std::size_t rows, std::size_t cols, double eps,
                                         StoreType residual_type = StoreType::kFloat32);

/// out = (x - mean) / sqrt(var + eps) * weight + bias, var the population variance.
std::vector<double> layer_norm(const std::vector<float>& x, const std::vector<float>& weight, const std::vector<float>& bias,
                               std::size_t rows, std::size_t cols, double eps);

/// Max-subtracted softmax of each row.
std::vector<double> softmax(const std::vector<float>& x, std::size_t rows, std::size_t cols);

/// The reductions of row_reduce, numbered as its launcher's op parameter.
enum class RowReduceOp { kSum = 0, kMean = 1, kMax = 2 };

/// out[t] = sum / mean / max of row t, as torch: a NaN in the row makes the max NaN; an empty
/// row (cols = 0) sums to 0 and has mean NaN; its max throws std::invalid_argument.
std::vector<double> row_reduce(const std::vector<float>& x, std::size_t rows, std::size_t cols, RowReduceOp op);

/// x is [rows, 2 * inter] (gate half first); out[t, i] = silu(x[t, i]) * x[t, inter + i].
std::vector<double> silu_and_mul(const std::vector<float>& x, std::size_t rows, std::size_t inter);

/// As silu_and_mul with gelu, tanh form: 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))).
std::vector<double> gelu_and_mul(const std::vector<float>& x, std::size_t rows, std::size_t inter);

/// The results of fp8_quant.
struct Fp8QuantResult {
  std::vector<float> q;        ///< the fp8 values (on the fp8 grid), [rows, cols]
  std::vector<float> scales;   ///< per row, fp32: max(amax, 1e-12) / fp8_max rounded to fp32
  std::vector<double> dequant; ///< q * scale, [rows, cols]
};

/// How torch divides a tensor by a Python number (a CPU scalar) where the reference runs: on the CPU
/// the true quotient; on a GPU (CUDA, and ROCm's build of the same kernel) the product with the
/// divisor's fp32 reciprocal (aten/src/ATen/native/cuda/BinaryDivTrueKernel.cu). They differ in the
/// last bit for some dividends, which moves fp8 codes at rounding ties.
enum class ScalarDivision { kQuotient, kReciprocal };

/// Per-row dynamic fp8 quantization: scale = fp32(max(amax, eps) / fp8_max) (kReciprocal: the fp32
/// max(amax, eps) times fp32(1 / fp8_max)), as the kernel stores it; q = fp8_round(clamp(x / scale, -fp8_max, fp8_max)) with x / scale rounded to fp32
/// as the kernel divides, so q is the kernel's q exactly. fp8_max is fp8_max_value(fnuz). Groups
/// of a row (per_token_group_quant_fp8) are rows of [rows * cols / group, group].
Fp8QuantResult fp8_quant(const std::vector<float>& x, std::size_t rows, std::size_t cols, bool fnuz, float eps = 1e-12f,
                         ScalarDivision division = ScalarDivision::kQuotient);

// ---------------------------------------------------------------------------------------------
// MoE gating, GEMM, paged decode attention
// ---------------------------------------------------------------------------------------------

/// The results of moe_gating.
struct MoeGatingResult {
  std::vector<double> weights;     ///< [rows, k], descending per row
  std::vector<std::int32_t> ids;   ///< [rows, k], expert ids
};

/// Softmax over the experts of each row, the k largest probabilities in descending order (equal
/// probabilities: the lower expert id first), divided by their sum when renormalize.
MoeGatingResult moe_gating(const std::vector<float>& gating, std::size_t rows, std::size_t experts, std::size_t k, bool renormalize);

/// out[m, n] = sum_k x[m, k] * w[n, k] + bias[n]: x [M, K], w [N, K] (out = x w^T + b).
/// An empty bias means none.
std::vector<double> gemm(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& bias, std::size_t M,
                         std::size_t N, std::size_t K);

/// Sizes of paged decode attention.
struct PagedAttentionShape {
  std::size_t batch = 0;        ///< B: sequences, one query token each
  std::size_t q_heads = 0;      ///< Hq
  std::size_t kv_heads = 0;     ///< Hkv (divides Hq; query head h reads KV head h / (Hq / Hkv))
  std::size_t head_size = 0;    ///< D
  std::size_t page_size = 0;    ///< P: tokens per cache block
  std::size_t max_pages = 0;    ///< MB: columns of block_tables
};

/// out[b, h, :] = softmax_t(scale * q[b, h] . k_t) v_t over the seq_lens[b] cached tokens of
/// sequence b; token t lives in cache block block_tables[b, t / P], slot t % P. query
/// [B, Hq, D], key_cache / value_cache [NB, P, Hkv, D] (NB from their size), block_tables
/// [B, MB], seq_lens [B]. A sequence of length 0 gives zeros.
std::vector<double> paged_decode_attention(const std::vector<float>& query, const std::vector<float>& key_cache,
                                           const std::vector<float>& value_cache, const std::vector<std::int32_t>& block_tables,
                                           const std::vector<std::int32_t>& seq_lens, const PagedAttentionShape& shape, double scale);

// ---------------------------------------------------------------------------------------------
// Serving kernels: KV-cache write, top-k filter, vLLM-layout paged decode, MLA decode
// ---------------------------------------------------------------------------------------------

/// The two paged KV-cache layouts kv_cache_write writes (and the attention families read).
enum class KvCacheLayout {
  /// vLLM reshape_and_cache: key [NB, Hkv, D/X, P, X], value [NB, Hkv, D, P].
  kVllm = 0,
  /// vLLM reshape_and_cache_flash / FlashInfer NHD: key and value [NB, P, Hkv, D].
  kFlash = 1,
};

/// Sizes of a paged KV cache and of the new rows written into it.
struct KvCacheShape {
  std::size_t tokens = 0;      ///< T: new rows (key and value are [T, Hkv, D])
  std::size_t kv_heads = 0;    ///< Hkv
  std::size_t head_size = 0;   ///< D
  std::size_t num_blocks = 0;  ///< NB: pages in the cache
  std::size_t block_size = 0;  ///< P: tokens per page
  std::size_t x = 1;           ///< X: elements of the key's innermost 16-byte group (kVllm; divides D)
  KvCacheLayout layout = KvCacheLayout::kVllm;
};

/// Offset of key element (head h, dim d) of the token in page `block`, slot `off`.
std::size_t kv_key_offset(const KvCacheShape& s, std::size_t block, std::size_t off, std::size_t h, std::size_t d);
/// Offset of value element (head h, dim d) of the token in page `block`, slot `off`.
std::size_t kv_value_offset(const KvCacheShape& s, std::size_t block, std::size_t off, std::size_t h, std::size_t d);

/// One element kv_cache_write moves: its index in key and value [T, Hkv, D] and its offsets in
/// key_cache and value_cache.
struct KvCacheMove {
  std::size_t row;    ///< index into key / value
  std::size_t key;    ///< offset in key_cache
  std::size_t value;  ///< offset in value_cache
};

/// Every element move of kv_cache_write, in token order (slots of -1 give none); validates the
/// slots and sizes as kv_cache_write does (the caches' sizes are not seen here).
std::vector<KvCacheMove> kv_cache_moves(const std::vector<std::int64_t>& slot_mapping, const KvCacheShape& shape);

/// key_cache / value_cache updated in place: token t's [Hkv, D] rows of key and value go to page
/// slot_mapping[t] / P, slot slot_mapping[t] % P; a slot of -1 is skipped (padding). Throws
/// std::invalid_argument for a slot below -1 or at or past NB * P, and for sizes that disagree.
void kv_cache_write(const std::vector<float>& key, const std::vector<float>& value, std::vector<float>& key_cache,
                    std::vector<float>& value_cache, const std::vector<std::int64_t>& slot_mapping, const KvCacheShape& shape);

/// Per-row top-k threshold filter (vLLM apply_top_k_only, HF TopKLogitsWarper): the threshold of
/// row r is its k[r]-th largest value (duplicates counted; NaN ranks above every number, as in
/// torch.topk); elements below it become -inf, the rest keep their value (ties at the threshold
/// are all kept). k[r] == cols leaves the row as it is. logits [rows, cols]; k has `rows`
/// entries. Throws std::invalid_argument for k < 1 or k > cols.
std::vector<double> topk_filter(const std::vector<float>& logits, std::size_t rows, std::size_t cols, const std::vector<std::int64_t>& k);

/// A vLLM-layout cache (key [NB, Hkv, D/X, P, X] or value [NB, Hkv, D, P]) rearranged to the
/// [NB, P, Hkv, D] layout of paged_decode_attention.
std::vector<float> vllm_cache_to_flash(const std::vector<float>& cache, std::size_t num_blocks, std::size_t kv_heads, std::size_t head_size,
                                       std::size_t block_size, std::size_t x, bool key);

/// Sizes of MLA decode (DeepSeek multi-head latent attention with the weights absorbed).
struct MlaShape {
  std::size_t batch = 0;      ///< B: sequences, one query token each
  std::size_t heads = 0;      ///< H: query heads, all reading the one latent KV head
  std::size_t qk_dim = 0;     ///< Dqk: latent + rope dims of q and of a cache row (512 + 64 = 576)
  std::size_t v_dim = 0;      ///< Dv <= Dqk: the value is the cache row's first Dv dims (512)
  std::size_t page_size = 0;  ///< P
  std::size_t max_pages = 0;  ///< MB: columns of block_tables
};

/// out[b, h, :] = sum_t softmax_t(scale * q[b, h] . c_t) c_t[:Dv] over the seq_lens[b] cached rows
/// c_t of sequence b (kv_cache [NB, P, Dqk], token t in page block_tables[b, t / P], slot t % P);
/// query [B, H, Dqk]; out [B, H, Dv]. A sequence of length 0 gives zeros.
std::vector<double> mla_decode(const std::vector<float>& query, const std::vector<float>& kv_cache, const std::vector<std::int32_t>& block_tables,
                               const std::vector<std::int32_t>& seq_lens, const MlaShape& shape, double scale);

/// Sizes of a fused mixture-of-experts MLP (fused_moe).
struct FusedMoeShape {
  std::size_t tokens = 0;        ///< T
  std::size_t hidden = 0;        ///< H
  std::size_t intermediate = 0;  ///< I: w13 holds 2I rows (gate, then up) per expert
  std::size_t experts = 0;       ///< E
  std::size_t topk = 0;          ///< k: slots per token
};

/// out[t] = sum over slots s (in order) of topk_weights[t, s] * down_e(act_e(hidden[t])) with
/// e = topk_ids[t, s]; gate and up (rows n and I + n of w13[e] against hidden[t]) rounded to
/// `intermediate`, then act = round(round(silu(gate)) * up) as the HF and vLLM references round
/// their 16-bit tensors; down (w2[e] [H, I] against act) and the weighted sum in double. A slot whose
/// id is outside [0, E) adds nothing. hidden [T, H], w13 [E, 2I, H], w2 [E, H, I], topk_weights and
/// topk_ids [T, k]; out [T, H]. Throws std::invalid_argument for sizes that disagree.
std::vector<double> fused_moe(const std::vector<float>& hidden, const std::vector<float>& w13, const std::vector<float>& w2,
                              const std::vector<float>& topk_weights, const std::vector<std::int32_t>& topk_ids, const FusedMoeShape& shape,
                              StoreType intermediate);
/// fused_moe with block-scaled fp8 weights (vLLM torch_experts with block_shape [128, 128]): each
/// token's hidden row quantized per group of 128 (fp8_quant of the group, eps 1e-10); per expert e,
/// its routed rows through fp8_block_gemm against w13[e] (scales w13_scale[e] [2I/128, H/128]), gate
/// and up rounded to `intermediate`, act = round(round(silu(gate)) * up), act quantized per group of
/// 128 the same way, fp8_block_gemm against w2[e] (w2_scale[e] [H/128, I/128]) rounded to
/// `intermediate`; out[t] = sum over slots in order of topk_weights[t, s] * that (double). w13 and w2
/// are the fp8 values (decoded); fnuz picks the format of the quantizations (max 240, else 448). H and
/// I must be multiples of 128 (the reference's group quantization asserts it). A slot whose id is
/// outside [0, E) adds nothing. `division`: the group scales' rule (kQuotient: the reference on the
/// CPU; kReciprocal: on a GPU, as the kernel). Throws std::invalid_argument for sizes that disagree.
std::vector<double> fused_moe_fp8(const std::vector<float>& hidden, const std::vector<float>& w13, const std::vector<float>& w2,
                                  const std::vector<float>& w13_scale, const std::vector<float>& w2_scale, const std::vector<float>& topk_weights,
                                  const std::vector<std::int32_t>& topk_ids, const FusedMoeShape& shape, StoreType intermediate, bool fnuz,
                                  ScalarDivision division = ScalarDivision::kQuotient);
/// Sizes of the block-scaled fp8 GEMM (DeepSeek-V3 / vLLM w8a8_block_fp8_matmul).
struct Fp8BlockGemmShape {
  std::size_t m = 0, n = 0, k = 0;
  std::size_t block_n = 128;  ///< rows of B one weight scale covers
  std::size_t block_k = 128;  ///< K elements one activation or weight scale covers
};

/// out[m, n] = sum_kb fp32(As[m, kb] * Bs[n / block_n, kb]) * sum_{k in block kb} A[m, k] B[n, k]:
/// each K block's partial sum (exact in fp64: fp8 products have 8 significant bits) times the
/// fp32 product of the two scales, summed in fp64, as vLLM's native reference promotes every
/// block (C += (a @ b.T) * (As * Bs)); the last block may be shorter than block_k. a [M, K] and
/// b [N, K] are the fp8 values (decoded), a_scales [M, ceil(K / block_k)], b_scales
/// [ceil(N / block_n), ceil(K / block_k)]. Throws std::invalid_argument for sizes that disagree.
std::vector<double> fp8_block_gemm(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& a_scales,
                                   const std::vector<float>& b_scales, const Fp8BlockGemmShape& shape);
/// Sizes of prefill attention over packed variable-length sequences (flash_attn_varlen_func), or
/// of its unified paged form (vLLM unified attention: K/V read through a block table).
struct PrefillAttentionShape {
  std::size_t batch = 0;         ///< B: sequences
  std::size_t q_heads = 0;       ///< Hq
  std::size_t kv_heads = 0;      ///< Hkv (divides Hq)
  std::size_t head_size = 0;     ///< D
  std::size_t q_tokens = 0;      ///< Tq: rows of q and out [Tq, Hq, D]
  std::size_t kv_tokens = 0;     ///< Tk: rows of k/v [Tk, Hkv, D] (packed), NB * P (paged)
  std::size_t max_seqlen_q = 0;  ///< the longest sequence's query rows may not exceed it
  bool causal = false;           ///< mask aligned to the end: query i of lq sees keys j <= i + lk - lq
  bool paged = false;            ///< k/v caches [NB, P, Hkv, D] read through block_tables[B, MB]
  std::size_t page_size = 0;     ///< P (paged)
  std::size_t max_pages = 0;     ///< MB (paged)
};

/// out[i, h, :] = sum_j softmax_j(scale * q[i, h] . k_j) v_j over the keys query i sees, query
/// head h reading KV head h / (Hq / Hkv). Sequence b's queries are rows cu_seqlens_q[b] ..
/// cu_seqlens_q[b + 1]; its keys are rows kv_lens[b] .. kv_lens[b + 1] of k/v (packed: kv_lens is
/// cu_seqlens_k, B + 1 entries), or its kv_lens[b] context tokens through block_tables (paged:
/// seq_lens, B entries; token t in page block_tables[b, t / P], slot t % P). A query that sees no
/// key gets zeros. Throws std::invalid_argument where cu_seqlens_q does not cover [0, Tq) in
/// order, a sequence has more than max_seqlen_q queries, key offsets leave k/v, or a page id
/// leaves the cache.
std::vector<double> prefill_attention(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                                      const std::vector<std::int32_t>& cu_seqlens_q, const std::vector<std::int32_t>& kv_lens,
                                      const std::vector<std::int32_t>& block_tables, const PrefillAttentionShape& shape, double scale);

// ---------------------------------------------------------------------------------------------
// Cross-lane reductions, emulated
// ---------------------------------------------------------------------------------------------

/// Every lane's value after the butterfly of kwiki::warp_reduce_sum (or _max): for offset =
/// warp_size / 2 down to 1, lane i adds (or maxes) the value of lane i ^ offset, in fp32, in
/// that order, as kwiki_shfl_xor does on the device. lanes.size() must equal warp_size, a
/// power of two (32 for CUDA warps, 64 for CDNA wavefronts).
std::vector<float> wave_butterfly_emulated(const std::vector<float>& lanes, int warp_size, bool max = false);

/// Lane 0's result of the emulated butterfly sum (every lane holds the same value).
float wave_reduce_emulated(const std::vector<float>& lanes, int warp_size);

/// kwiki::block_reduce_sum emulated: a butterfly per warp, warp w's total in partial[w], then
/// warp 0 reduces partial[lane] (0 for lanes >= the number of warps) with the same butterfly.
/// threads.size() must be a multiple of warp_size and at most 1024.
float block_reduce_emulated(const std::vector<float>& threads, int warp_size);

}  // namespace kwiki::reference
