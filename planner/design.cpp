// The V0 design of a pattern on a target, each choice backed by the wiki record behind it.
#include "design.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "family.hpp"

namespace kwiki::detail {
namespace {

int element_bytes(const std::string& dtype) {
  if (dtype == "fp32" || dtype == "int32") return 4;
  if (dtype.rfind("fp8", 0) == 0 || dtype == "int8") return 1;
  return 2;
}

class Consulter {
 public:
  Consulter(QueryEngine& engine, Design& design, const TargetInfo& target) : engine_(engine), design_(design), target_(target) {}
  // Asks the wiki within the target's scope (its product and architecture are part of every
  // request, and a record of the other vendor is never cited); records the top results as
  // consulted; returns the best record id ("" if none).
  std::string ask(const std::string& aspect, const std::string& request, std::size_t keep = 3) {
    QueryOptions options;
    options.max_records = 8;
    options.brief = true;
    const std::string scoped = request.find(target_.product) == std::string::npos ? request + " on " + target_.product + " " + target_.arch : request;
    const QueryResult r = engine_.query(scoped, options);
    std::string best;
    std::size_t kept = 0;
    for (const auto& a : r.answer.records) {
      if (a.record.type == "spec-sheet" || a.record.type == "measured-ceiling") continue;
      if (!a.record.vendor.empty() && a.record.vendor != "generic" && a.record.vendor != target_.vendor) continue;
      if (best.empty()) best = a.record.key;
      if (kept++ < keep && seen_.insert(a.record.key + "|" + r.answer.query_id).second)
        design_.consulted.push_back({a.record.key, r.answer.query_id, aspect});
    }
    return best;
  }

 private:
  QueryEngine& engine_;
  Design& design_;
  const TargetInfo& target_;
  std::set<std::string> seen_;
};

std::string cite(const std::string& record) { return record.empty() ? "(no record found)" : record; }

}  // namespace

Design design_v0(QueryEngine& engine, const std::string& pattern, const Task& task, const TargetInfo& t,
                 const std::vector<std::string>& operator_words) {
  Design d;
  Consulter wiki(engine, d, t);
  const std::string gpu = t.product;
  // The framework's word goes into every query that names the language (CuteDSL, FlyDSL, HIP C++, CUDA C++).
  const FrameworkRow* fw = find_framework(t.framework);
  const std::string lang = fw ? fw->query : "CUDA C++";
  const bool amd = t.vendor == "amd";
  const int e = element_bytes(task.dtype);
  const int vec = std::max(1, 16 / e);
  const int warp = t.warp_size;
  const int units = t.compute_units.present ? static_cast<int>(t.compute_units.value) : (amd ? 304 : 132);
  double max_h = 0;
  for (const auto& s : task.shapes)
    for (const char* k : {"hidden_size", "intermediate_size"})
      if (auto it = s.dims.find(k); it != s.dims.end()) max_h = std::max(max_h, it->second);

  auto add = [&](const std::string& aspect, const std::string& choice, const std::string& record) {
    d.choices.push_back({aspect, choice, cite(record)});
  };
  const std::string vec_rec = wiki.ask("vector width", "16-byte vectorized coalesced global loads " + lang + " on " + gpu);
  const std::string acc_rec = wiki.ask("accumulation", pattern + " fp32 accumulation numerics");
  const bool row_pattern = pattern == "rms_norm" || pattern == "fused_add_rms_norm" || pattern == "layer_norm" || pattern == "softmax" ||
                           pattern == "fp8_quant" || pattern == "row_reduce";
  if (row_pattern) {
    d.template_name = (pattern == "row_reduce" ? pattern : "row_" + pattern) + (amd ? "_hip" : "_cuda");
    const std::string op_words = pattern == "fp8_quant"    ? "fp8 per-token quantization dynamic scale"
                                 : pattern == "row_reduce" ? "row reduction sum mean max over the last dimension"
                                                           : pattern;
    const std::string main_rec = wiki.ask("row mapping", op_words + " kernel on " + gpu + " in " + lang);
    const std::string red_rec = wiki.ask("reduction", std::string(amd ? "wave64 DPP cross-lane" : "warp shuffle __shfl_xor_sync") +
                                                          " block reduction on " + gpu);
    // As the templates' launch plan (kwiki_compat.cuh, plan_row_launch): the fewest accesses a thread,
    // at least the template's minimum (LayerNorm 2, fp8 quant 4), with a block of at most 1024 threads
    // up to 16 elements a thread and 512 beyond.
    const int min_acc = pattern == "fp8_quant" ? 4 : pattern == "layer_norm" ? 2 : 1;
    const long long nacc = static_cast<long long>(std::ceil(std::max(1.0, max_h) / vec));
    const int max_acc = vec > 1 ? 32 / vec : 4;
    const auto covers = [&](int a) { return static_cast<long long>(a) * (a * vec > 16 ? 512 : 1024); };
    int acc = 1;
    while (acc < max_acc && (acc < min_acc || nacc > covers(acc))) acc *= 2;
    int threads = static_cast<int>(std::min<long long>((nacc + acc - 1) / acc, 1024));
    threads = std::clamp((threads + warp - 1) / warp * warp, warp, 1024);
    add("thread mapping", "one row per block (" + std::to_string(threads) + " threads for the widest row, " +
                              std::to_string(static_cast<int>(std::ceil(max_h / (threads * vec)))) +
                              " vector(s) per thread" + (min_acc > 1 ? ", at least " + std::to_string(min_acc) + " a thread, so each " + t.compute_unit_name + " holds more rows" : "") +
                              "); rows shorter than " + std::to_string(warp * vec) + " elements share a block, one " +
                              (amd ? "wavefront" : "warp") + " per row",
        main_rec);
    // The fused-add and fp8 quant templates keep one block per row; the other row templates
    // prefetch on a resident grid (baseline/kernels/*.cuh, launch_rows).
    const bool prefetched = pattern != "fused_add_rms_norm" && pattern != "fp8_quant";
    add("vector width", std::to_string(vec) + " x " + task.dtype + " = 16-byte loads and stores, aligned rows; rows that are not a multiple of " +
                            std::to_string(vec) + " take scalar (still coalesced) accesses",
        vec_rec);
    add("data movement",
        std::string("the row is read from DRAM once into registers and ") +
            (pattern == "row_reduce" ? "one element per row is written" : "written once") + "; no shared-memory staging of the data" +
            (prefetched ? "; the next row's loads are issued before this row is reduced, so they stay in flight across its barriers and stores" : ""),
        main_rec);
    const bool has_max = pattern == "softmax" || pattern == "fp8_quant" || pattern == "row_reduce";
    add("reduction", std::string(amd ? "64-lane" : "32-lane") + " butterfly (" + (amd ? "__shfl_xor / DPP" : "__shfl_xor_sync") +
                         ") then one value per " + (amd ? "wavefront" : "warp") + " through " + t.onchip_name +
                         (!amd && has_max ? "; an fp32 max takes one redux.sync on order-preserving integer keys instead of the butterfly" : "") +
                         (pattern == "layer_norm" ? "; this thread's weight and bias columns are loaded before the reductions" : ""),
        red_rec);
    add("grid", prefetched ? "a resident grid (blocks per " + t.compute_unit_name + " from the occupancy query x " + std::to_string(units) + " " +
                                 t.compute_unit_name + "s, at most one block per row) strides over the T rows"
                           : "one block per row: T blocks (T from 1 to the largest shape); no persistent loop in V0",
        main_rec);
    add("accumulation", "fp32 statistics and fp32 math, one rounding at the store", acc_rec);
    if (pattern == "row_reduce")
      add("reduction op",
          "sum / mean / max as the reference (the plan's reduce_op), one fp32 value per row stored in the input's dtype; max keeps a NaN "
          "(counted apart: the group max compares with > and would drop it). Claimed only when the reference returns the input's "
          "dtype: an upcast result (.float() without .to(x.dtype), or another output dtype in metadata.json) leaves the pattern "
          "unknown rather than generate a kernel that stores the wrong type",
          acc_rec);
    if (pattern == "fp8_quant")
      add("fp8 format",
          amd && t.arch == "cdna3"
              ? "e4m3fnuz, max 240 (gfx942 uses FNUZ)"
              : std::string("e4m3fn, max 448") +
                    (amd ? ", saturate before the cast"
                         : ": the saturating cvt (satfinite) gives the clamped value's byte, so no separate clamp; amax keeps a NaN, as torch does"),
          wiki.ask("fp8 format", std::string("fp8 e4m3 format max value on ") + gpu));
  } else if (pattern == "gelu_and_mul") {
    d.template_name = "gated_" + pattern + (amd ? "_hip" : "_cuda");
    const std::string rec = wiki.ask("elementwise mapping", pattern + " vectorized grid-stride kernel on " + gpu);
    add("thread mapping", "grid-stride over T x I outputs, 256 threads per block, " + std::to_string(vec) + " outputs per thread per step", rec);
    add("vector width", "16-byte loads of gate and up halves, 16-byte stores", vec_rec);
    add("grid", "min(ceil(T*I / (256*" + std::to_string(vec) + ")), " + std::to_string(units) + " " + t.compute_unit_name + "s x 8) blocks", rec);
    add("accumulation", "fp32 sigmoid/gelu and products, one rounding at the store", acc_rec);
  } else if (pattern == "gemm") {
    // A DSL framework with the family's hand-written V0 in it (baseline/kernels/gemm_<framework>.py).
    const FamilyRow* row = find_family(pattern);
    const bool dsl = fw && !fw->native && row && family_has_dsl_kernel(*row, t.framework);
    d.template_name = amd ? "gemm_mfma_hip" : dsl ? "gemm_tma_wgmma_" + t.framework : "gemm_tma_wgmma_cuda";
    const std::string mma_rec = amd ? wiki.ask("matrix instruction", "bf16 gemm MFMA tiling on " + gpu)
                                    : wiki.ask("matrix instruction", "bf16 gemm wgmma mma_async warpgroup on " + gpu);
    const std::string pipe_rec = wiki.ask("pipelining", amd ? "LDS double buffering register prefetch gemm on " + gpu
                                                            : "TMA multistage pipeline mbarrier warp specialization gemm on " + gpu);
    const std::string swz_rec = wiki.ask("bank conflicts", std::string(amd ? "LDS" : "shared memory") + " swizzle bank conflicts gemm");
    const std::string tile_rec = wiki.ask("tiling", "gemm block tile warp tile hierarchical tiling");
    if (amd) {
      add("matrix instruction", t.arch == "cdna4" ? "v_mfma_f32_32x32x16_bf16 (K-doubled on gfx950)" : "v_mfma_f32_32x32x8_bf16", mma_rec);
      add("tile", "block tile 128 x 128 x 32, 4 wavefronts (256 threads), 64 x 64 per wavefront", tile_rec);
      add("data movement", "global -> registers -> LDS double buffer, 16-byte loads", pipe_rec);
      add("bank conflicts", "XOR-swizzled " + t.onchip_name + " layout for the A and B tiles", swz_rec);
      add("grid", "ceil(M/128) x ceil(N/128) blocks; small-M shapes are memory-bound (weights dominate bytes)", tile_rec);
    } else if (dsl) {
      add("matrix instruction", "wgmma.mma_async m64n128k16 -> fp32 through " + lang + "'s warpgroup MMA atom, both operands from shared memory",
          mma_rec);
      add("tile", "block tile 128 x 128 x 64: two warpgroups of 64 x 128 (64 fp32 accumulators a thread); warp 0 also issues the copies",
          tile_rec);
      add("data movement", "TMA tile copies into a 4-stage shared-memory ring, full/empty mbarriers (the DSL's TMA pipeline); TMA zero-fills "
                           "the parts of a tile past M, N or K",
          pipe_rec);
      add("bank conflicts", "128-byte swizzle: TMA writes it, wgmma's descriptors read it", swz_rec);
      add("grid", "ceil(M/128) x ceil(N/128) blocks; the epilogue stores the elements inside out; K % 8 != 0, unaligned pointers or fp32 "
                  "take a one-thread-per-output fallback kernel",
          tile_rec);
    } else {
      add("matrix instruction",
          "wgmma.mma_async m64n256k16 bf16 -> fp32, both operands from shared memory (M > 64 and M*N*K >= 2^28); "
          "mma.sync m16n8k16 for smaller problems, a tensor-core GEMV for M <= 64",
          mma_rec);
      add("tile", "block tile 128 x 256 x 64: a producer warpgroup and two consumer warpgroups of 64 x 256 (128 fp32 accumulators a thread)",
          tile_rec);
      add("data movement", "TMA tile copies into a 4-stage shared-memory ring, full/empty mbarriers between producer and consumers",
          pipe_rec);
      add("bank conflicts", "128-byte swizzle: TMA writes it, wgmma's descriptors read it", swz_rec);
      add("grid", "ceil(M/128) x ceil(N/256) blocks; small-M shapes are memory-bound (weights dominate bytes)", tile_rec);
    }
    add("epilogue", "fp32 accumulators, optional bias added in fp32, one rounding to bf16 at the store",
        wiki.ask("epilogue", "gemm epilogue fusion bias"));
  } else if (pattern == "paged_decode_attention") {
    d.template_name = amd ? "paged_decode_gqa_hip" : "paged_decode_gqa_cuda";
    const std::string split_rec = wiki.ask("split-KV", "decode attention split-kv flash decoding number of splits on " + gpu);
    const std::string gqa_rec = wiki.ask("GQA", "GQA decode attention load each KV head once for its query heads");
    const std::string page_rec = wiki.ask("paging", "paged attention block table page gather vectorized loads");
    add("mapping", "one block per (sequence, KV head, split); the block serves all query heads of its GQA group", gqa_rec);
    // CUDA: the template's tensor-core kernel (16-bit, head size 64/128, up to 8 query heads per
    // KV head) keeps K/V in flight in shared memory and wants about one block per SM; the
    // CUDA-core kernel (HIP, and the other CUDA shapes) wants about 16.
    const std::string units_text = std::to_string(units) + " " + t.compute_unit_name + "s";
    add("split-KV", (amd ? "splits = clamp(ceil(16 x " + units_text + " / (batch x KV heads)), 1, ceil(context / 512))"
                         : "splits = clamp(floor(" + units_text + " / (batch x KV heads)), 1, ceil(context / 512)) on the tensor-core "
                           "path (16-bit, head size 64/128, <= 8 query heads per KV head), else clamp(ceil(16 x " + units_text +
                           " / (batch x KV heads)), ...)") +
                        "; a second kernel merges partials with their log-sum-exp",
        split_rec);
    add("data movement", amd ? "16-byte loads of K and V rows through the block table (page size 16); each KV element read once"
                             : "cp.async 16-byte copies of K and V rows through the block table into a 2-chunk shared-memory ring per "
                               "warp (16 tokens a chunk, XOR-swizzled), ldmatrix to registers; each KV element read once",
        page_rec);
    if (!amd)
      add("products", "Q K^T and P V on mma.sync m16n8k16 (the GQA group's query heads as rows), P fed as two 16-bit terms",
          wiki.ask("tensor cores", "decode attention tensor cores mma GQA query heads"));
    add("softmax", "online softmax in fp32 (running max and sum), fp32 partial outputs and LSE",
        wiki.ask("numerics", "online softmax fp32 partials log-sum-exp merge decode"));
    add("threads", amd ? "256 threads (4 wavefronts)" : "128 threads (4 warps)", split_rec);
  } else if (pattern == "moe_gating") {
    d.template_name = amd ? "moe_topk_gating_hip" : "moe_topk_gating_cuda";
    const std::string rec = wiki.ask("mapping", "moe top-k gating softmax one warp per token kernel on " + gpu);
    add("mapping", std::string("one ") + (amd ? "wavefront" : "warp") + " per token; experts spread across lanes; 4 tokens per block", rec);
    add("top-k", "k rounds of a lane argmax (ties to the lower expert id), then optional renormalization in fp32",
        wiki.ask("ties", "moe gating deterministic tie break topk"));
    add("accumulation", "fp32 softmax with max subtraction", acc_rec);
  } else if (pattern == "kv_cache_write") {
    d.template_name = amd ? "kv_cache_write_hip" : "kv_cache_write_cuda";
    const std::string slot_rec = wiki.ask("slot mapping", "reshape_and_cache write new k and v into the paged kv cache with slot_mapping");
    const std::string skip_rec = wiki.ask("padding", "kv cache padding slot negative skip");
    add("mapping", "one block per new token (a grid of at most 65536 blocks strides over T); the token's Hkv x D row split in 16-byte "
                   "chunks over the block's 128 threads",
        slot_rec);
    add("layout", "vLLM layout: each key chunk is one 16-byte store into [NB, Hkv, D/x, P, x] (x = 16 bytes of elements); each value chunk "
                  "scatters its " + std::to_string(vec) + " elements into [NB, Hkv, D, P] at the page-size stride; flash layout: the row is "
                  "contiguous in [NB, P, Hkv, D], 16-byte stores",
        slot_rec);
    add("padding", "slot -1 (a padding token of a CUDA graph batch) stores nothing; a slot past NB x P stores nothing either (the twin refuses it)",
        skip_rec);
    add("vector width", std::to_string(vec) + " x " + task.dtype + " = 16-byte loads of key and value rows", vec_rec);
  } else if (pattern == "topk_filter") {
    d.template_name = amd ? "topk_filter_radix_hip" : "topk_filter_radix_cuda";
    const std::string radix_rec = wiki.ask("selection", "radix select top-k k-th largest element of each row without sorting");
    const std::string sort_rec = wiki.ask("anti-pattern", "sorting the whole vocabulary row for top-k is an anti-pattern");
    add("mapping", "one block of 512 threads per row (a grid of at most 65536 blocks strides over B rows)", radix_rec);
    add("selection", "radix select on order-preserving 32-bit keys of the fp32 values (NaN the largest, as torch.topk): four passes of an "
                     "8-bit digit histogram in " + t.onchip_name + " narrow the prefix to the k-th largest key; no sort",
        radix_rec);
    add("filter", "a last pass stores each value or -inf where it is below the threshold (ties at the threshold kept, as `logits < kth`); "
                  "k >= V leaves the row as it is; in place when the reference filters its logits in place",
        sort_rec);
    add("data movement", "16-byte loads; the row is read from DRAM once and re-read from L2 by the later passes (a 128k fp32 row is 0.5 MB)",
        vec_rec);
  } else if (pattern == "paged_decode_attention_vllm") {
    d.template_name = amd ? "paged_decode_vllm_hip" : "paged_decode_vllm_cuda";
    const std::string split_rec = wiki.ask("split-KV", "flash decoding split-kv: split the context across blocks when batch x heads is small");
    const std::string gqa_rec = wiki.ask("GQA", "GQA decode attention load each KV head once for its query heads");
    const std::string page_rec = wiki.ask("paging", "paged attention block table page gather vectorized loads");
    add("mapping", "one block (4 " + std::string(amd ? "wavefronts" : "warps") + ") per (sequence, KV head, split); the block serves all query "
                   "heads of its GQA group, so each K/V element is read once",
        gqa_rec);
    add("split-KV", "splits = max(ceil(context / 512), min(ceil(2 x " + std::to_string(units) + " / (batch x KV heads)), ceil(context / 64))); "
                    "a second kernel merges the fp32 partials with their log-sum-exp",
        split_rec);
    add("data movement", "keys [NB, Hkv, D/x, P, x]: a " + std::string(amd ? "wavefront" : "warp") + " reads one page as 16-byte x-groups, "
                         "lanes over the page's tokens then over the groups (coalesced); values [NB, Hkv, D, P]: each lane reads its rows' P "
                         "tokens as 16-byte chunks; the query group in " + t.onchip_name,
        page_rec);
    add("softmax", "scores of the split in " + t.onchip_name + ", block max and sum in fp32, fp32 partial outputs and LSE",
        wiki.ask("numerics", "merge split-kv partial outputs with their log-sum-exp combine"));
    if (!amd)
      add("tensor cores", "V0's kernel for bf16/fp16, D 64/128, GQA group <= 8, P a multiple of 16 (checked on the H200 at every serving-bench shape): a "
                          "per-warp cp.async ring of 16-token K/V chunks and mma.sync for both products; other shapes, or "
                          "KWIKI_DECODE_TENSOR_CORES=0 at compile time, take the CUDA-core kernel",
          wiki.ask("tensor cores", "paged decode attention tensor cores mma.sync cp.async"));
  } else if (pattern == "mla_decode") {
    d.template_name = amd ? "mla_decode_hip" : "mla_decode_cuda";
    const std::string mla_rec = wiki.ask("MLA", "decode attention for DeepSeek-V2/V3 models: FlashMLA-style decode head dim 576 for q.k and 512 for v "
                                                "over the compressed latent cache");
    const std::string split_rec = wiki.ask("split-KV", "flash decoding split-kv: split the context across blocks when batch x heads is small");
    add("mapping", "one block (4 " + std::string(amd ? "wavefronts" : "warps") + ") per (sequence, group of 16 query heads, split); the latent "
                   "row [Dqk] is read once per head group (H = 16 per GPU at DeepSeek-V3 TP8: once)",
        mla_rec);
    add("products", "scores: a " + std::string(amd ? "wavefront" : "warp") + " per token, 16-byte chunks of the row against the 16 queries held in " +
                        t.onchip_name + "; values: each " + std::string(amd ? "wavefront" : "warp") + " owns a quarter of the Dv dims for every "
                        "token of the split; " + std::string(amd ? "vector ALUs in V0 (an MFMA path is the next version)" : "tensor cores in V0 (mma.sync over "
                        "32-token tiles streamed by cp.async, checked on the H200 at every serving-bench shape; KWIKI_DECODE_TENSOR_CORES=0 "
                        "at compile time takes the CUDA-core kernel)"),
        amd ? mla_rec : wiki.ask("tensor cores", "MLA decode wgmma tensor cores FlashMLA"));
    add("split-KV", "splits = max(ceil(context / 256), min(ceil(2 x " + std::to_string(units) + " / (batch x head groups)), ceil(context / 64))); "
                    "partials merged with their LSE",
        split_rec);
    add("softmax", "fp32 scores and partials; the value is the first Dv dims of the same cache row (no second cache read)",
        wiki.ask("numerics", "merge split-kv partial outputs with their log-sum-exp combine"));
  } else if (pattern == "fused_moe") {
    d.template_name = amd ? "fused_moe_hip" : "fused_moe_cuda";
    const std::string align_rec = wiki.ask("routing", "fused moe align block size: sort token ids by expert, pad each expert to the block size");
    const std::string gemm_rec = wiki.ask("grouped GEMM", "moe grouped gemm experts gather token rows by sorted ids block sparse");
    add("routing", "deterministic, no atomics: a block per 256 (token, slot) entries counts each expert in " + t.onchip_name + "; one block scans "
                   "the chunk counts per expert and the experts' totals padded to 16 rows; a second pass places every entry at its chunk's "
                   "base plus the earlier entries of its expert in the chunk (a stable sort by expert); ids outside [0, E) are skipped",
        align_rec);
    add("grouped GEMMs", std::string("gate/up: a block per (16 sorted rows of one expert, 64 columns of I) computes gate and up of the same columns, "
                                     "rows gathered from hidden by the sorted ids, 32-wide K slices staged in ") + t.onchip_name + "; down: a block "
                         "per (16 rows, 128 columns of H) over the act rows; " + (amd ? std::string("vector ALUs in V0 (an MFMA path is the next version)")
                         : std::string("CUDA cores in V0 (an mma.sync m16n8k16 path for both GEMMs is written but not yet run on a GPU, "
                                       "so off; KWIKI_MOE_TENSOR_CORES=1 at compile time turns it on)")),
        gemm_rec);
    add("numerics", "fp32 accumulation; gate and up rounded to " + task.dtype + ", silu(gate) rounded, then silu x up rounded (the reference's "
                    "16-bit intermediates); the down products stay fp32 per (token, slot); the weighted sum over the k slots in slot order in "
                    "fp32, one rounding at the store: the same bits on every run",
        wiki.ask("numerics", "moe deterministic reduction order weighted sum over top-k no atomics"));
    add("scratch", "chunk counts, expert offsets, sorted ids (T*k + E*15 rows), block experts, act [T*k, I] and slot_out [T*k, H] fp32, passed in "
                   "by the caller (the launcher allocates nothing)",
        align_rec);
  } else if (pattern == "fused_moe_fp8") {
    d.template_name = amd ? "fused_moe_fp8_hip" : "fused_moe_fp8_cuda";
    const std::string align_rec = wiki.ask("routing", "fused moe align block size: sort token ids by expert, pad each expert to the block size");
    const std::string promo_rec = wiki.ask("promotion", "block-scaled fp8 gemm promotion interval 128 K fp32 accumulation DeepSeek-V3 fine-grained "
                                                        "quantization");
    const std::string scale_rec = wiki.ask("scales", "fp8 block scaling 1x128 activation 128x128 weight scales w8a8 block fp8 matmul");
    const std::string quant_rec = wiki.ask("quantization", "dynamic fp8 quantization amax scale clamp before the cast zero group scale");
    add("routing", "fused_moe's: deterministic, no atomics: chunk counts per expert in " + t.onchip_name + ", one scan block padding each "
                   "expert's rows to 16, a stable scatter of the (token, slot) entries by expert; ids outside [0, E) are skipped",
        align_rec);
    add("quantization", "hidden per token per group of 128 (a thread per group: amax, then fp32 x / scale clamped to the format's max and cast "
                        "round-to-nearest-even), and the SiLU x up intermediate the same way in the gate/up epilogue, one group per block "
                        "(the block owns 128 columns of I): the reference's per_token_group_quant_fp8 before each GEMM",
        quant_rec);
    add("scale rule", "each group's scale is max(amax, 1e-10) times the fp32 reciprocal of fp8_max, not the quotient: fp8_max is a Python "
                      "number, and torch's GPU division by one multiplies by its reciprocal (the twin divides, as torch on the CPU); the "
                      "quotient moved fp8 codes at ties and failed the check on the H200",
        wiki.ask("scale rule", "torch cuda division by a python number reciprocal multiply fp8 scale last bit"));
    add("grouped GEMMs", "gate/up: a block per (16 sorted rows of one expert, 128 columns of I) over the gate rows and the up rows of those "
                         "columns (each inside one 128 x 128 weight block); down: a block per (16 rows, 128 columns of H); fp8 rows read "
                         "as 16-byte chunks, decoded to fp32 into " + t.onchip_name + " 32 K at a time; " +
                             (amd ? std::string("vector ALUs in V0") : std::string("CUDA cores in V0 (fp8_block_gemm's mma.sync m16n8k32 path is "
                                                                                   "the next version)")),
        wiki.ask("grouped GEMM", "moe grouped gemm experts gather token rows by sorted ids block sparse"));
    add("numerics", "each 128-K block's partial in fp32, times the fp32 product a_scale * w_scale, added to an fp32 accumulator (every "
                    "block promoted, as native_w8a8_block_matmul); gate, up, silu(gate) and silu x up rounded to bf16 and the down "
                    "GEMM's output rounded to bf16 (the reference's GEMM outputs); the weighted sum over the k slots in slot order in fp32, "
                    "one rounding at the store; e4m3fn or e4m3fnuz by the fnuz parameter",
        promo_rec);
    add("scales", "activation scales [T, H/128] and [T*k, I/128], weight scales [E, 2I/128, H/128] and [E, H/128, I/128]: one per 128-K block "
                  "of a row, one per 128 x 128 block of a weight",
        scale_rec);
    add("scratch", "fused_moe's routing arrays, the quantized hidden [T, H] and intermediate [T*k, I] (bytes) with their fp32 group scales, "
                   "slot_out [T*k, H] fp32, passed in by the caller (the launcher allocates nothing)",
        align_rec);
  } else if (pattern == "fp8_block_gemm") {
    d.template_name = amd ? "fp8_block_gemm_hip" : "fp8_block_gemm_cuda";
    const std::string promo_rec = wiki.ask("promotion", "block-scaled fp8 gemm promotion interval 128 K fp32 accumulation DeepSeek-V3 fine-grained "
                                                        "quantization");
    const std::string scale_rec = wiki.ask("scales", "fp8 block scaling 1x128 activation 128x128 weight scales w8a8 block fp8 matmul");
    add("numerics", "each 128-wide K block's partial sum in fp32 from the exact fp8 products, scaled by the fp32 product As[m, kb] * "
                    "Bs[n / 128, kb] and added to an fp32 accumulator (the promotion vLLM's reference does block by block); one rounding "
                    "to bf16 at the store; e4m3fn on CUDA, e4m3fnuz on CDNA3 (the fnuz parameter)",
        promo_rec);
    add("mapping", std::string(amd ? "a block of 256 threads per 64 x 64 output tile (inside one 128-column weight-scale block), 4 x 4 outputs a "
                                     "thread"
                                   : "a block of 4 warps (2 x 2, 32 x 32 outputs a warp) per 64 x 64 output tile, each 128-K scale block of A and B "
                                     "staged by cp.async (double-buffered) and multiplied by mma.sync into a fresh fragment") +
                       "; grid ceil(N / 64) x ceil(M / 64)",
        scale_rec);
    add("data movement", "K in 32-wide steps: A and B rows as 16-byte loads, each fp8 value decoded to fp32 once into " + t.onchip_name +
                             " (k-major, padded rows), read by the tile's threads as broadcasts",
        vec_rec);
    add("matrix instruction",
        amd ? std::string("vector ALUs in V0; a matrix-core kernel (v_mfma_f32_16x16x32_fp8_fp8 on e4m3fnuz, a fresh result per 128-K "
                          "block promoted into the fp32 accumulator) is written but not yet run on a device, so off: "
                          "KWIKI_FP8_GEMM_TENSOR_CORES=1 at compile time turns it on")
            : std::string("tensor cores in V0: mma.sync m16n8k32 e4m3 -> fp32, a fresh fragment per 128-K block promoted into the fp32 "
                          "accumulator (checked on the H200 at every serving-bench shape); KWIKI_FP8_GEMM_TENSOR_CORES=0 at compile time "
                          "takes the CUDA-core kernel"),
        amd ? wiki.ask("matrix instruction", "MFMA fp8 e4m3fnuz instruction shapes") : wiki.ask("matrix instruction", "fp8 e4m3 mma tensor core wgmma"));
    add("roofline", "2MNK matrix FLOPs against the fp8 dense peak (twice the bf16 peak on Hopper and CDNA3); small M is bound by reading B "
                    "(N x K bytes)",
        acc_rec);
  } else if (pattern == "prefill_attention") {
    d.template_name = amd ? "prefill_attention_hip" : "prefill_attention_cuda";
    const std::string fa2_rec = wiki.ask("FlashAttention-2", "varlen prefill attention flash attention 2 online softmax tiles cu_seqlens packed sequences");
    const std::string gqa_rec = wiki.ask("GQA", "GQA prefill attention query heads share a KV head");
    const std::string page_rec = wiki.ask("paging", "paged attention block table page gather vectorized loads");
    add("mapping", "one block of 128 threads per (tile of 32 query rows, query head, sequence) on one linear grid, the longest tiles of a causal "
                   "sequence first; the grid covers max_seqlen_q rows a sequence, tiles past a sequence's end return at once",
        fa2_rec);
    add("loop", "FlashAttention-2 order: the query tile stays in " + t.onchip_name + ", K/V tiles of 4096 / D keys (16-bit) stream through " +
                    t.onchip_name + " in 16-byte chunks (rows padded by 16 bytes); causal tiles stop at the tile's last visible key",
        fa2_rec);
    add("layouts", "packed: sequence b's keys are rows cu_seqlens_k[b] .. cu_seqlens_k[b+1] of [Tk, Hkv, D]; paged (unified): its seq_lens[b] "
                   "context tokens through block_tables into [NB, P, Hkv, D]; the queries are the last q_len tokens (causal mask aligned to the end)",
        page_rec);
    add("GQA", "query head h reads KV head h / (Hq / Hkv); the query heads of one KV head are neighbouring blocks, so their K/V tiles meet in L2",
        gqa_rec);
    add("products", std::string("four threads a query row: each scores a quarter of the tile's keys (fp32 dot products) and accumulates a quarter of "
                                "the row's D outputs; ") + (amd ? "vector ALUs in V0 (an MFMA path is the next version)"
                                                                : "tensor cores in V0 for bf16/fp16 and D 64/128 (mma.sync for both "
                                                                  "products with P reused from the accumulators, 64 query rows a block of 4 "
                                                                  "warps, K fragments by ldmatrix, K and V tiles by cp.async one phase ahead: "
                                                                  "K of the next tile lands during this tile's softmax and P V, V during the "
                                                                  "next Q K^T; checked on the H200 at every serving-bench shape); D 256, fp32 "
                                                                  "or KWIKI_PREFILL_TENSOR_CORES=0 take the CUDA-core kernel"),
        amd ? fa2_rec : wiki.ask("tensor cores", "flash attention prefill tensor cores mma wgmma"));
    add("softmax", "online softmax in fp32 (exp2 of scale x log2(e) scores, running max and sum per row), one rounding at the store; a row that "
                   "sees no key stores zeros",
        wiki.ask("numerics", "online softmax fp32 running max rescale accumulator flash attention"));
  } else if (pattern == "generated") {
    // The generator's kernels: the skeleton follows from the IR (plans/kernel_ir.json).
    d.template_name = std::string("generated_") + t.framework;
    if (fw && !fw->native) {
      // The DSL backends (planner/generator/codegen_dsl.cpp) write the simpler skeletons, scalar accesses.
      add("skeleton", std::string("kernel.py in ") + fw->query + ": rows with a reduction: one block of 256 threads per row, each pass striding over the "
                      "row (re-read), no registers held across passes; no reduction: one thread per element or chunk; compiled for " + t.compile_target +
                      " without a device, run and timed only on the GPU",
          wiki.ask("DSL skeleton", "compile a " + lang + " kernel for " + t.compile_target + " without a GPU"));
      add("vector width", "chunks of 16 bytes for the widest type through " + lang + " copy atoms when every row splits into whole, aligned chunks "
                          "(checked per call); scalar loads and stores otherwise", vec_rec);
    } else {
      add("skeleton", "rows with a reduction: one warp (short rows) or one block per row, the row's 16-byte chunks held in registers and the next row "
                      "loaded while this one is reduced, on a resident grid; rows too long for registers re-read per pass; no reduction: a grid-stride "
                      "elementwise loop over 16-byte chunks, one flat index when every access is contiguous (checked per call)",
          wiki.ask("row skeleton", "row reduction kernel one block per row registers prefetch next row resident grid " + lang));
      add("split rows", amd ? std::string("rows too long for registers, too few to fill the device: still one block per row on CDNA (no thread-block "
                                          "clusters; a two-pass split is not written yet)")
                            : std::string("rows too long for registers, fewer than half the SMs: a cluster of 16 (else 8) blocks per row, each block's "
                                          "partial combined through distributed shared memory in rank order, so every block holds the same row result"),
          amd ? wiki.ask("split rows", "split-row two-pass reduction very long rows few rows")
              : wiki.ask("split rows", "very long row few rows thread block cluster distributed shared memory split-row reduction"));
      add("vector width", std::to_string(vec) + " elements (16 bytes) a chunk when every chunked access is aligned and the row length divides; a scalar "
                          "path otherwise", vec_rec);
    }
    add("numerics", "fp32 arithmetic; every intermediate that torch rounds to bf16/fp16/fp8 is rounded to that grid at the same op (the rounding contract)",
        wiki.ask("rounding contract", "bf16 intermediate rounding matches torch eager elementwise fp32 opmath"));
    add("fp8 casts", "round to nearest even; beyond the format's range NaN, as torch's cast (references clamp first); e4m3fn on CUDA, e4m3fnuz on CDNA3",
        wiki.ask("fp8 saturation", "fp8 e4m3 cast saturation clamp torch float8 conversion overflow"));
    add("reductions", std::string("warp butterflies then one value per ") + (amd ? "wavefront (64 lanes)" : "warp") + " through shared memory; max/argmax propagate NaN",
        wiki.ask("reductions", (amd ? std::string("wave64 ") : std::string("warp shuffle ")) + "block reduction sum max"));
  } else {
    d.template_name = "";  // unknown: no template
    std::string words;
    for (const auto& w : operator_words) words += w + " ";
    if (!words.empty()) wiki.ask("operator words", words + "kernel on " + gpu, 8);
    d.risks.push_back("pattern unknown: no V0 template; write the kernel and measure it with `kwiki baseline --kernel FILE`");
  }

  // Correctness, measurement and ISA targets hold for every pattern.
  const std::string tol_rec = wiki.ask("tolerances", "correctness tolerance per dtype bf16 fp16 fp32 fp8 compare with reference");
  const std::string nan_rec = wiki.ask("special values", "NaN Inf policy correctness check");
  d.correctness.push_back("tolerances: fp32 rtol 1e-5, bf16 rtol 1.6e-2 / atol 1e-2, fp16 rtol 1e-3, fp8 within 1 ulp after dequantization, integers exact <- " + cite(tol_rec));
  d.correctness.push_back("outputs poisoned (NaN) before each run; every element must be written; NaN/Inf only where the reference has them <- " + cite(nan_rec));
  d.correctness.push_back("the reference runs in fp32 on the same inputs; fresh seeds per run plus a fixed set, all recorded");
  d.boundary_cases = {"one row / one token", "a row length that is not a multiple of " + std::to_string(vec) + " (the scalar path)",
                      "the largest shape of the task (grid and register limits)"};
  if (pattern == "paged_decode_attention" || pattern == "paged_decode_attention_vllm" || pattern == "mla_decode") d.boundary_cases.push_back("a context length that is not a multiple of the page size; a sequence shorter than one split");
  if (pattern == "fused_moe" || pattern == "fused_moe_fp8")
    d.boundary_cases.push_back("one token (decode); experts with no token; every token on one expert; an id outside [0, E)");
  if (pattern == "fused_moe_fp8") d.boundary_cases.push_back("an all-zero 128-group (its scale is eps / fp8_max, its bytes zero); a group whose amax saturates the format");
  if (pattern == "prefill_attention") d.boundary_cases.push_back("a sequence of one query (decode) beside long prefill chunks; a sequence length that is not a multiple of the 32-row tile; a context not a multiple of the page size");
  const std::string time_rec = wiki.ask("timing", "time kernels with events warm-up median p10 p90");
  const std::string flush_rec = wiki.ask("L2 flush", "flush L2 between timed repetitions buffer twice the cache");
  const std::string graph_rec = wiki.ask("launch floor", "launch overhead tiny kernels cuda graphs replay");
  d.measurement.push_back("device events around the kernel alone; 10 warm-ups, 100 timed repetitions; median with p10/p90 <- " + cite(time_rec));
  d.measurement.push_back("L2 flushed between repetitions with a buffer of at least 2x " +
                          (t.l2_mb.present ? std::to_string(static_cast<int>(t.l2_mb.value)) + " MB (" + t.l2_mb.citation + ")" : std::string("the L2 size (query the device)")) +
                          " <- " + cite(flush_rec));
  d.measurement.push_back("shapes whose SOL is under 10 us are also timed as graph replays, against the launch floor <- " + cite(graph_rec));
  d.measurement.push_back("the PyTorch reference is timed the same way in the same run");

  const std::string spill_rec = wiki.ask("ISA: spills", amd ? "scratch spills register pressure HIP" : "ptxas register spills local memory");
  d.isa_targets.push_back(std::string("16-byte global accesses (") + (amd ? "global_load_dwordx4 / buffer_load_dwordx4" : "LDG.E.128 / STG.E.128") + ") <- " +
                          cite(vec_rec));
  d.isa_targets.push_back("no local-memory spills (0 bytes spill stores/loads in the compiler's report) <- " + cite(spill_rec));
  if (pattern == "gemm") {
    d.isa_targets.push_back(amd ? "v_mfma_* present in the listing <- " + cite(wiki.ask("ISA: mfma", "MFMA instruction bf16 shapes"))
                                : "HGMMA (wgmma) in the listing, HMMA for the mma.sync path <- " + cite(wiki.ask("ISA: wgmma", "wgmma syntax shapes HGMMA")));
    d.isa_targets.push_back("no bank-conflicted " + t.onchip_name + " access <- " + cite(wiki.ask("ISA: banks", t.onchip_name + " bank conflicts symptom")));
  }
  d.risks.push_back("V0 targets correctness and a clean memory path; the stop condition (90% of the bounding peak) may need later versions");
  return d;
}

}  // namespace kwiki::detail
