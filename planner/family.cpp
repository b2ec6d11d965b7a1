// The kernel families: one table of what kwiki can build a V0 for, and what each stage needs of it.
#include "family.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

namespace kwiki::detail {

std::optional<double> WorkInput::dim(const char* name) const {
  const auto it = shape.dims.find(name);
  if (it == shape.dims.end()) return std::nullopt;
  return it->second;
}

namespace {

std::optional<WorkCounts> rms_norm_work(const WorkInput& in) {
  const auto t = in.dim("num_tokens"), h = in.dim("hidden_size");
  if (!t || !h) return std::nullopt;
  const double e = in.element_bytes;
  WorkCounts w;
  w.bytes_read = (*t * *h + *h) * e;  // x, weight
  w.bytes_written = *t * *h * e;
  w.vector_flops = 4 * *t * *h + *t;  // square, sum, scale, weight per element; rsqrt per row
  w.basis = "x[T,H] and weight[H] read, out[T,H] written; 4 vector ops per element + 1 rsqrt per row";
  return w;
}

std::optional<WorkCounts> fused_add_rms_norm_work(const WorkInput& in) {
  const auto t = in.dim("num_tokens"), h = in.dim("hidden_size");
  if (!t || !h) return std::nullopt;
  const double e = in.element_bytes;
  WorkCounts w;
  w.bytes_read = (2 * *t * *h + *h) * e;  // x, residual, weight
  w.bytes_written = 2 * *t * *h * e;      // out, residual (in place)
  w.vector_flops = 5 * *t * *h + *t;
  w.basis = "x, residual [T,H] and weight[H] read; out and residual [T,H] written; 5 vector ops per element + 1 rsqrt per row";
  return w;
}

std::optional<WorkCounts> layer_norm_work(const WorkInput& in) {
  const auto t = in.dim("num_tokens"), h = in.dim("hidden_size");
  if (!t || !h) return std::nullopt;
  const double e = in.element_bytes;
  WorkCounts w;
  w.bytes_read = (*t * *h + 2 * *h) * e;
  w.bytes_written = *t * *h * e;
  w.vector_flops = 7 * *t * *h + *t;
  w.basis = "x[T,H], weight and bias [H] read, out written; 7 vector ops per element (2 sums, centre, square, scale, weight, bias) + 1 rsqrt per row";
  return w;
}

std::optional<WorkCounts> softmax_work(const WorkInput& in) {
  const auto t = in.dim("num_tokens"), h = in.dim("hidden_size");
  if (!t || !h) return std::nullopt;
  const double e = in.element_bytes;
  WorkCounts w;
  w.bytes_read = *t * *h * e;
  w.bytes_written = *t * *h * e;
  w.vector_flops = 5 * *t * *h;
  w.basis = "x[T,N] read, y[T,N] written; max, subtract, exp, sum, divide per element";
  return w;
}

std::optional<WorkCounts> row_reduce_work(const WorkInput& in) {
  const auto t = in.dim("num_tokens"), h = in.dim("hidden_size");
  if (!t || !h) return std::nullopt;
  const double e = in.element_bytes;
  WorkCounts w;
  w.bytes_read = *t * *h * e;
  w.bytes_written = *t * e;
  w.vector_flops = *t * *h;
  w.basis = "x[T,H] read, out[T] written (one element per row); one add or max per element";
  return w;
}

std::optional<WorkCounts> gated_work(const WorkInput& in, double flops_per_output, const char* basis) {
  const auto t = in.dim("num_tokens");
  const auto i = in.dim("intermediate_size") ? in.dim("intermediate_size") : in.dim("hidden_size");
  if (!t || !i) return std::nullopt;
  const double e = in.element_bytes;
  WorkCounts w;
  w.bytes_read = 2 * *t * *i * e;
  w.bytes_written = *t * *i * e;
  w.vector_flops = flops_per_output * *t * *i;
  w.basis = basis;
  return w;
}

std::optional<WorkCounts> gelu_and_mul_work(const WorkInput& in) {
  return gated_work(in, 10, "x[T,2I] read, y[T,I] written; tanh-form gelu (8 ops) + 2 products per output");
}

std::optional<WorkCounts> gemm_work(const WorkInput& in) {
  const auto t = in.dim("num_tokens"), k = in.dim("in_features"), n = in.dim("out_features");
  if (!t || !k || !n) return std::nullopt;
  const double e = in.element_bytes, m = *t;
  const bool bias = in.shape.init_kwargs.is_object() && in.shape.init_kwargs.value("bias", false) == true;
  WorkCounts w;
  w.matrix_flops = 2 * m * *n * *k;
  w.vector_flops = bias ? m * *n : 0;
  w.bytes_read = (m * *k + *n * *k + (bias ? *n : 0)) * e;
  w.bytes_written = m * *n * e;
  w.basis = "A[M,K] and W[N,K] (+bias[N]) read once, C[M,N] written once; 2MNK matrix FLOPs";
  return w;
}

std::optional<WorkCounts> paged_decode_attention_work(const WorkInput& in) {
  const auto b = in.dim("num_seqs"), hq = in.dim("num_q_heads"), hkv = in.dim("num_kv_heads"), d = in.dim("head_size"), l = in.dim("context_len");
  if (!b || !hq || !hkv || !d || !l) return std::nullopt;
  const double e = in.element_bytes;
  const double page = in.dim("block_size") ? *in.dim("block_size") : 16;
  WorkCounts w;
  w.bytes_read = *b * *hq * *d * e + 2 * *b * *hkv * *l * *d * e + *b * std::ceil(*l / page) * 4 + *b * 4;
  w.bytes_written = *b * *hq * *d * e;
  w.matrix_flops = 4 * *b * *hq * *l * *d;  // QK^T and PV
  w.vector_flops = 5 * *b * *hq * *l;      // scale, max, subtract, exp, sum
  w.basis = "q, K and V pages (each KV head once per sequence: GQA), block table and lengths read; out written; QK^T + PV = 4*B*Hq*L*D";
  return w;
}

std::optional<WorkCounts> fp8_quant_work(const WorkInput& in) {
  const auto t = in.dim("num_tokens"), h = in.dim("hidden_size");
  if (!t || !h) return std::nullopt;
  WorkCounts w;
  w.bytes_read = *t * *h * in.element_bytes;
  w.bytes_written = *t * *h * 1 + *t * 4;
  w.vector_flops = 5 * *t * *h + *t;
  w.basis = "x[T,H] read; fp8 q[T,H] and fp32 scale[T] written; abs, max, scale, 2-sided clamp per element";
  return w;
}

std::optional<WorkCounts> moe_gating_work(const WorkInput& in) {
  const auto t = in.dim("num_tokens"), ex = in.dim("num_experts"), k = in.dim("topk");
  if (!t || !ex || !k) return std::nullopt;
  WorkCounts w;
  w.bytes_read = *t * *ex * 4;
  w.bytes_written = *t * *k * (4 + 4);
  w.vector_flops = 5 * *t * *ex + *t * *ex * *k;
  w.basis = "fp32 logits[T,E] read; fp32 weights and int32 ids [T,k] written; softmax (5 ops) + k selection passes per expert";
  return w;
}

// A size the canonical dims do not name (vocab_size, kv_lora_rank), from the shape's kwargs.
std::optional<double> kwarg(const WorkInput& in, const char* name) {
  for (const auto* kwargs : {&in.shape.input_kwargs, &in.shape.init_kwargs})
    if (kwargs->is_object() && kwargs->contains(name) && (*kwargs)[name].is_number()) return (*kwargs)[name].get<double>();
  return std::nullopt;
}

std::optional<WorkCounts> kv_cache_write_work(const WorkInput& in) {
  const auto t = in.dim("num_tokens"), hkv = in.dim("num_kv_heads"), d = in.dim("head_size");
  if (!t || !hkv || !d) return std::nullopt;
  const double rows = *t * *hkv * *d * in.element_bytes;
  WorkCounts w;
  w.bytes_read = 2 * rows + *t * 8;  // key, value, int64 slots
  w.bytes_written = 2 * rows;        // only the addressed slots of the caches
  w.basis = "key and value [T,Hkv,D] and slot_mapping[T] read; the same rows written into the caches (the rest of the caches untouched)";
  return w;
}

std::optional<WorkCounts> topk_filter_work(const WorkInput& in) {
  const auto b = in.dim("num_seqs") ? in.dim("num_seqs") : in.dim("num_tokens");
  const auto v = kwarg(in, "vocab_size") ? kwarg(in, "vocab_size") : in.dim("hidden_size");
  if (!b || !v) return std::nullopt;
  WorkCounts w;
  w.bytes_read = *b * *v * in.element_bytes;
  w.bytes_written = *b * *v * in.element_bytes;
  w.vector_flops = 6 * *b * *v;  // key transform, 4 digit histograms, the compare at the store
  w.basis = "logits[B,V] read once from DRAM (the radix passes re-read it from L2), filtered logits written; 6 ops per element";
  return w;
}

std::optional<WorkCounts> mla_decode_work(const WorkInput& in) {
  const auto b = in.dim("num_seqs"), h = in.dim("num_q_heads"), l = in.dim("context_len");
  const auto latent = kwarg(in, "kv_lora_rank"), rope = kwarg(in, "qk_rope_head_dim");
  if (!b || !h || !l || !latent || !rope) return std::nullopt;
  const double e = in.element_bytes, dqk = *latent + *rope, dv = *latent;
  const double page = in.dim("block_size") ? *in.dim("block_size") : 64;
  WorkCounts w;
  w.bytes_read = *b * *h * dqk * e + *b * *l * dqk * e + *b * std::ceil(*l / page) * 4 + *b * 4;
  w.bytes_written = *b * *h * dv * e;
  w.matrix_flops = 2 * *b * *h * *l * (dqk + dv);  // Q C^T and P C[:, :Dv]
  w.vector_flops = 5 * *b * *h * *l;
  w.basis = "q [B,H,Dqk], the latent cache rows [L,Dqk] of each sequence (one KV head for all H), block table read; out [B,H,Dv] written; 2*B*H*L*(Dqk+Dv)";
  return w;
}

std::optional<WorkCounts> fused_moe_work(const WorkInput& in) {
  const auto t = in.dim("num_tokens"), h = in.dim("hidden_size"), i = in.dim("intermediate_size"), ex = in.dim("num_experts");
  const auto k = in.dim("topk") ? in.dim("topk") : kwarg(in, "num_experts_per_tok");
  if (!t || !h || !i || !ex || !k || *ex < 1) return std::nullopt;
  const double e = in.element_bytes, slots = *t * *k;
  // Experts with at least one token under uniform routing: each is missed by a token with probability 1 - k/E.
  const double touched = *ex * (1 - std::pow(std::max(0.0, 1 - *k / *ex), *t));
  WorkCounts w;
  w.matrix_flops = 6 * slots * *h * *i;  // [T*k, H] x [H, 2I], then [T*k, I] x [I, H]
  w.vector_flops = 4 * slots * *i + 2 * slots * *h;  // silu, product; the weighted sum over the k slots
  w.bytes_read = *t * *h * e + touched * 3 * *i * *h * e + slots * 8;
  w.bytes_written = *t * *h * e;
  w.basis = "hidden[T,H], the routed experts' w13 [2I,H] and w2 [H,I] (experts hit by uniform routing), topk weights and ids read; out[T,H] "
            "written (the scratch's round trips not counted); 6*T*k*H*I matrix FLOPs";
  return w;
}

std::optional<WorkCounts> fused_moe_fp8_work(const WorkInput& in) {
  const auto t = in.dim("num_tokens"), h = in.dim("hidden_size"), i = in.dim("intermediate_size"), ex = in.dim("num_experts");
  const auto k = in.dim("topk") ? in.dim("topk") : kwarg(in, "num_experts_per_tok");
  if (!t || !h || !i || !ex || !k || *ex < 1) return std::nullopt;
  const double slots = *t * *k, hb = std::ceil(*h / 128), ib = std::ceil(*i / 128);
  const double touched = *ex * (1 - std::pow(std::max(0.0, 1 - *k / *ex), *t));  // as fused_moe_work
  WorkCounts w;
  w.matrix_flops = 6 * slots * *h * *i;  // on the fp8 dense rate
  // The two quantizations (abs, max, divide, clamp), each 128-K block's promotion, silu and product, the weighted sum.
  w.vector_flops = 5 * (*t * *h + slots * *i) + 2 * slots * (2 * *i * hb + *h * ib) + 4 * slots * *i + 2 * slots * *h;
  w.bytes_read = *t * *h * 2 + touched * (3 * *i * *h + (2 * ib * hb + hb * ib) * 4) + slots * 8;
  w.bytes_written = *t * *h * 2;
  w.basis = "bf16 hidden[T,H], the routed experts' fp8 w13 [2I,H] and w2 [H,I] (1 byte each) with their fp32 128x128 block scales (experts hit "
            "by uniform routing), topk weights and ids read; bf16 out[T,H] written (the scratch's round trips not counted); 6*T*k*H*I matrix "
            "FLOPs at the fp8 rate";
  return w;
}

std::optional<WorkCounts> fp8_block_gemm_work(const WorkInput& in) {
  const auto m = in.dim("num_tokens"), k = in.dim("in_features"), n = in.dim("out_features");
  if (!m || !k || !n) return std::nullopt;
  const double kb = std::ceil(*k / 128), nb = std::ceil(*n / 128);
  WorkCounts w;
  w.matrix_flops = 2 * *m * *n * *k;  // on the fp8 dense rate (2x bf16's on Hopper and CDNA3)
  w.vector_flops = 2 * *m * *n * kb;  // each K block's partial scaled and added (the promotion)
  w.bytes_read = *m * *k + *n * *k + (*m * kb + nb * kb) * 4;
  w.bytes_written = *m * *n * 2;
  w.basis = "fp8 A[M,K] and B[N,K] (1 byte each), fp32 scales As[M,K/128] and Bs[N/128,K/128] read once, bf16 out[M,N] written; 2MNK "
            "matrix FLOPs at the fp8 rate + 2 per output per 128-K block";
  return w;
}

// A list of sizes from the shape's kwargs (per-sequence lengths), or nullopt.
std::optional<std::vector<double>> list_kwarg(const WorkInput& in, const char* name) {
  for (const auto* kwargs : {&in.shape.input_kwargs, &in.shape.init_kwargs}) {
    if (!kwargs->is_object() || !kwargs->contains(name) || !(*kwargs)[name].is_array()) continue;
    std::vector<double> out;
    for (const auto& v : (*kwargs)[name]) {
      if (!v.is_number()) return std::nullopt;
      out.push_back(v.get<double>());
    }
    return out;
  }
  return std::nullopt;
}

std::optional<WorkCounts> prefill_attention_work(const WorkInput& in) {
  const auto hq = in.dim("num_q_heads"), hkv = in.dim("num_kv_heads"), d = in.dim("head_size");
  auto lq = list_kwarg(in, "query_lens");
  if (!lq) lq = list_kwarg(in, "seq_lens");
  auto lk = list_kwarg(in, "context_lens");
  if (!lk) lk = lq;
  if (!hq || !hkv || !d || !lq || !lk || lq->size() != lk->size()) return std::nullopt;
  bool causal = true;
  for (const auto* kwargs : {&in.shape.input_kwargs, &in.shape.init_kwargs})
    if (kwargs->is_object() && kwargs->contains("causal") && (*kwargs)["causal"].is_boolean()) causal = (*kwargs)["causal"].get<bool>();
  double pairs = 0, tq = 0, tk = 0;
  for (std::size_t b = 0; b < lq->size(); ++b) {
    const double q = (*lq)[b], k = (*lk)[b];
    tq += q;
    tk += k;
    // Causal, aligned to the end: query i sees min(k, i + k - q + 1) keys.
    if (!causal) pairs += q * k;
    else
      for (double i = 0; i < q; ++i) pairs += std::max(0.0, std::min(k, i + k - q + 1));
  }
  const double e = in.element_bytes;
  WorkCounts w;
  w.bytes_read = tq * *hq * *d * e + 2 * tk * *hkv * *d * e + 8 * static_cast<double>(lq->size());
  w.bytes_written = tq * *hq * *d * e;
  w.matrix_flops = 4 * pairs * *hq * *d;  // QK^T and PV over the (query, key) pairs each mask keeps
  w.vector_flops = 5 * pairs * *hq;
  w.basis = std::string("q [Tq,Hq,D] and each sequence's K/V rows (once per KV head: GQA) read, out written; 4*D*Hq per (query, key) pair ") +
            (causal ? "under the causal mask aligned to the end" : "(no mask)");
  return w;
}

}  // namespace

const FamilyRow kFamilies[] = {
    {"fused_add_rms_norm", "fused_add_rmsnorm add_rms_norm", "fused_add_rms_norm",
     "x[T,H], residual[T,H] (read, then overwritten with x+residual), weight[H], out[T,H]; T, H; eps", "", fused_add_rms_norm_work},
    {"rms_norm", "rmsnorm", "rms_norm", "x[T,H], weight[H], out[T,H]; T, H; eps", "", rms_norm_work},
    {"layer_norm", "layernorm", "layer_norm", "x[T,H], weight[H], bias[H], out[T,H]; T, H; eps", "", layer_norm_work},
    {"softmax", "", "softmax", "x[T,N], out[T,N]; T, N", "", softmax_work},
    {"row_reduce", "reduction", "reduction", "x[T,H], out[T]; T, H; op (0 sum, 1 mean, 2 max)", "", row_reduce_work},
    // silu_and_mul left the table in session 10: the generator's kernel was as fast or faster at
    // every sample shape on the H200 (docs/PERF.md); those tasks are the generator's now.
    {"gelu_and_mul", "geglu gelu_mul", "gelu_and_mul", "x[T,2I], out[T,I] (tanh form); T, I", "", gelu_and_mul_work},
    {"fp8_quant", "fp8_per_token_quant per_token_quant", "fp8_quant", "x[T,H], q[T,H] (fp8 bytes), scale[T] (fp32); T, H; fp8_max",
     "", fp8_quant_work},
    {"moe_gating", "moe_topk_gating topk_softmax", "moe_gating", "gating[T,E] (fp32), topk_weights[T,k] (fp32), topk_ids[T,k] (int32); T, E, k; renormalize",
     "", moe_gating_work},
    {"gemm", "linear matmul", "gemm", "x[M,K], w[N,K], bias[N] or null, out[M,N]; M, N, K", "bias", gemm_work, false, "cutedsl"},
    {"paged_decode_attention", "paged_attention decode_attention", "decode_attention",
     "query[B,Hq,D], key_cache[NB,P,Hkv,D], value_cache[NB,P,Hkv,D], block_tables[B,MB], seq_lens[B], out[B,Hq,D], partial_out, partial_lse; "
     "B, Hq, Hkv, D, P, MB, S; scale",
     "", paged_decode_attention_work},
    // Serving kernels (issue 20): the cache write, the sampler's top-k filter, decode attention in
    // vLLM's own cache layout and MLA decode.
    {"kv_cache_write", "reshape_and_cache reshape_and_cache_flash cache_write", "kv_cache_write",
     "key[T,Hkv,D], value[T,Hkv,D], key_cache, value_cache (written in place at the slots; layout 0: [NB,Hkv,D/X,P,X] and [NB,Hkv,D,P], "
     "layout 1: [NB,P,Hkv,D] both), slot_mapping[T] (int64, -1 skips); T, Hkv, D, NB, P, X, layout",
     "", kv_cache_write_work, true},
    {"topk_filter", "top_k_filter apply_top_k top_k_logits", "topk_filter",
     "logits[B,V], k[B] (int64) or null, out[B,V] (may be logits itself); B, V; k (when the k tensor is null)", "", topk_filter_work},
    {"paged_decode_attention_vllm", "paged_attention_v2 vllm_paged_attention", "decode_attention",
     "query[B,Hq,D], key_cache[NB,Hkv,D/X,P,X], value_cache[NB,Hkv,D,P], block_tables[B,MB], seq_lens[B], out[B,Hq,D], partial_out, partial_lse; "
     "B, Hq, Hkv, D, P, MB, S, X, NB; scale",
     "", paged_decode_attention_work},
    {"mla_decode", "mla flash_mla mla_decode_attention", "mla_decode",
     "query[B,H,Dqk], kv_cache[NB,P,Dqk], block_tables[B,MB], seq_lens[B], out[B,H,Dv] (Dv: the first dims of a cache row), partial_out, partial_lse; "
     "B, H, Dqk, Dv, P, MB, S, NB; scale",
     "", mla_decode_work},
    // Fused MoE (issue 20, family 3): routing preparation, grouped GEMM gate/up, SiLU x up, grouped GEMM down, weighted sum.
    {"fused_moe", "fused_experts fused_moe_forward moe_forward experts moe_experts moe_mlp", "fused_moe",
     "hidden[T,H], w13[E,2I,H] (gate rows, then up rows), w2[E,H,I], topk_weights[T,k] (fp32), topk_ids[T,k] (int32), out[T,H], "
     "chunk_counts, expert_offsets, sorted_ids, block_expert (int32 scratch), act[T*k,I], slot_out[T*k,H] (fp32); T, H, I, E, k, BM",
     "", fused_moe_work, true},  // reads only the routed experts' weights: the counter's bytes, not the dry run's whole stacks
    // Fused MoE with block-scaled fp8 weights (issue 20, family 3's fp8 half): DeepSeek-V3 / Qwen3-FP8 as vLLM serves them, the
    // activations and the SiLU x up intermediate quantized per 1 x 128 group, 128 x 128 weight scales, every 128-K block promoted.
    {"fused_moe_fp8", "fused_experts_fp8 w8a8_block_fp8_moe fused_moe_fp8_block block_fp8_moe moe_fp8", "fused_moe",
     "hidden[T,H], w13[E,2I,H] (fp8 bytes: gate rows, then up rows), w2[E,H,I] (fp8 bytes), w13_scale[E,2I/128,H/128], w2_scale[E,H/128,I/128] "
     "(fp32), topk_weights[T,k] (fp32), topk_ids[T,k] (int32), out[T,H], chunk_counts, expert_offsets, sorted_ids, block_expert (int32 "
     "scratch), a_q[T,H] (fp8 bytes), a_scale[T,H/128], act_q[T*k,I] (fp8 bytes), act_scale[T*k,I/128], slot_out[T*k,H] (fp32); T, H, I, E, "
     "k, BM (H and I multiples of 128); fnuz (0 e4m3fn, 1 e4m3fnuz)",
     "", fused_moe_fp8_work, true},
    // Block-scaled fp8 GEMM (issue 20): DeepSeek-V3 / vLLM w8a8_block_fp8_matmul, 1 x 128 activation
    // and 128 x 128 weight scales, each 128-K block promoted to fp32.
    {"fp8_block_gemm", "w8a8_block_fp8_matmul block_scaled_fp8_gemm fp8_gemm_blockscale fp8_block_matmul deepgemm_fp8_gemm", "gemm",
     "A[M,K] (fp8 bytes), B[N,K] (fp8 bytes), As[M,K/128] (fp32), Bs[N/128,K/128] (fp32), out[M,N]; M, N, K, BN, BK (128 x 128 only); "
     "fnuz (0 e4m3fn, 1 e4m3fnuz)",
     "", fp8_block_gemm_work},
    // Prefill attention (issue 20, family 1): packed varlen sequences or the paged unified form.
    {"prefill_attention", "varlen_attention flash_attn_varlen_func flash_attn_varlen unified_attention context_attention prefill",
     "prefill_attention",
     "q[Tq,Hq,D], k, v (layout 0: [Tk,Hkv,D]; layout 1: [NB,P,Hkv,D]), cu_seqlens_q[B+1], kv_lens (cu_seqlens_k[B+1] or seq_lens[B]), out[Tq,Hq,D], "
     "block_tables[B,MB] or null; B, Hq, Hkv, D, Tq, Tk, max_seqlen_q, causal, layout, P, MB; scale",
     "block_tables", prefill_attention_work},
    // The generator (planner/generator/): any pointwise/reduction graph it lowers to its kernel IR,
    // proven by the IR's own CPU twin; its launcher takes the IR's buffers, size slots and floats.
    // Last: a hand-written family that is proven keeps its task.
    {"generated", "generator", "", "the IR's buffers (plans/kernel_ir.json): inputs, parameters, outputs in its order; dims: its size slots; params: its floats",
     "", nullptr},
};
const std::size_t kFamilyCount = sizeof(kFamilies) / sizeof(kFamilies[0]);
static_assert(sizeof(kFamilies) / sizeof(kFamilies[0]) == 19, "a new family is a row here and its files (family.hpp says which)");

const FamilyRow* find_family(std::string_view name) {
  for (std::size_t i = 0; i < kFamilyCount; ++i) {
    const FamilyRow& row = kFamilies[i];
    if (name == row.name) return &row;
    std::istringstream aliases(row.aliases);
    for (std::string a; aliases >> a;)
      if (name == a) return &row;
  }
  return nullptr;
}

bool family_has_dsl_kernel(const FamilyRow& row, std::string_view framework) {
  std::istringstream words(row.dsl_frameworks);
  for (std::string w; words >> w;)
    if (w == framework) return true;
  return false;
}

std::string dsl_kernel_file(const FamilyRow& row, std::string_view framework) {
  return std::string(row.name) + "_" + std::string(framework) + ".py";
}

std::string family_names() {
  std::string out;
  for (std::size_t i = 0; i < kFamilyCount; ++i) out += std::string(out.empty() ? "" : ",") + kFamilies[i].name;
  return out;
}

}  // namespace kwiki::detail
