// Names a task's compute pattern from its reference's PyTorch calls, with the evidence.
#include <re2/re2.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "kwiki/planner.hpp"
#include "row_reduction.hpp"

namespace kwiki {
namespace detail {

std::string reference_source(const Task& task) {
  if (task.reference.empty()) return {};
  std::ifstream in(task.reference);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<RowReduction> detect_row_reduction(const Task& task) {
  const std::string source = reference_source(task);
  // The names that hold an input: forward's parameters and their .float() / .to(...) copies.
  std::set<std::string> inputs;
  std::string params;
  static const RE2 kForward(R"(def\s+forward\s*\(\s*self\s*,([^)]*)\))");
  if (!RE2::PartialMatch(source, kForward, &params)) return std::nullopt;
  static const RE2 kParam(R"(^\s*(\w+))");
  std::stringstream ps(params);
  for (std::string p; std::getline(ps, p, ',');)
    if (std::string name; RE2::PartialMatch(p, kParam, &name)) inputs.insert(name);
  static const RE2 kCopy(R"((\w+)\s*=\s*(\w+)\s*\.(?:float\(\)|to\([^)]*\)))");
  re2::StringPiece copies(source);
  for (std::string alias, of; RE2::FindAndConsume(&copies, kCopy, &alias, &of);)
    if (inputs.count(of)) inputs.insert(alias);
  // x.op(-1 | dim=-1 [, keepdim=...]) or torch.op(x, ...), optionally through .float(); max
  // returns (values, indices), so it counts only with .values or [0].
  static const RE2 kCall(
      R"(((?:torch\.(sum|mean|amax|max)\(\s*(\w+)(?:\.float\(\))?\s*,|(\w+)(?:\.float\(\))?\.(sum|mean|amax|max)\())"
      R"(\s*(?:dim\s*=\s*)?-1\s*(?:,\s*keepdim\s*=\s*(True|False)\s*)?\)(\.values|\[0\])?))");
  std::optional<RowReduction> found;
  re2::StringPiece rest(source);
  std::string call, op_fn, arg_fn, arg_m, op_m, keep, picked;
  std::vector<std::string> calls;
  while (RE2::FindAndConsume(&rest, kCall, &call, &op_fn, &arg_fn, &arg_m, &op_m, &keep, &picked)) {
    std::string op = op_fn.empty() ? op_m : op_fn;
    const std::string arg = op_fn.empty() ? arg_m : arg_fn;
    if (!inputs.count(arg) || (op == "max" && picked.empty())) continue;
    if (op == "amax") op = "max";
    if (found && found->op != op) return std::nullopt;  // two kinds of reduction: not one template
    found = RowReduction{op, op == "sum" ? 0 : op == "mean" ? 1 : 2, keep == "True", arg + "." + op + "(dim=-1)" + (keep == "True" ? " keepdim" : ""), {}};
    calls.push_back(call);
  }
  if (!found) return std::nullopt;
  // The template stores in the input's type: an upcast result is not claimed.
  if (auto od = task.metadata.find("output_dtypes"); od != task.metadata.end() && od->is_object())
    for (const auto& out_dtype : *od)
      if (out_dtype.is_string() && out_dtype.get<std::string>() != task.dtype) return std::nullopt;
  static const RE2 kUpcast(R"(\.float\(\)|torch\.float32)");
  static const RE2 kCastBack(R"(\.to\(\s*\w+\.dtype\s*\)|\.type_as\()");
  if (RE2::PartialMatch(source, kUpcast) && !RE2::PartialMatch(source, kCastBack)) return std::nullopt;
  // The source without the reduction calls: what other patterns' signals must be looked for in.
  found->source_without_calls = source;
  for (const auto& c : calls)
    for (std::size_t at; (at = found->source_without_calls.find(c)) != std::string::npos;) found->source_without_calls.erase(at, c.size());
  return found;
}

}  // namespace detail
namespace {

struct Signal {
  const char* pattern;   // canonical pattern it votes for
  const char* regex;     // RE2 over the reference source
  double weight;
  const char* evidence;  // what it shows
};

// Each signal is a call or idiom; a pattern needs enough weight to be named.
const Signal kSignals[] = {
    {"rms_norm", R"(rms_norm\s*\()", 1.0, "rms_norm call"},
    {"rms_norm", R"(pow\(\s*2\s*\)\s*\.mean\()", 0.6, "mean of squares"},
    {"rms_norm", R"(rsqrt\()", 0.4, "rsqrt"},
    {"fused_add_rms_norm", R"((residual|resid)\s*(\.add_\(|\+=|\.copy_\())", 0.9, "residual updated in place"},
    {"fused_add_rms_norm", R"(fused_add_rms_norm)", 1.2, "fused_add_rms_norm named"},
    {"layer_norm", R"(layer_norm\s*\()", 1.2, "layer_norm call"},
    {"layer_norm", R"(\.var\(|var_mean\()", 0.6, "variance"},
    {"softmax", R"(softmax\s*\()", 1.0, "softmax call"},
    {"silu_and_mul", R"(silu\s*\()", 0.7, "silu"},
    {"silu_and_mul", R"(silu\s*\([^)]*\)\s*\*)", 0.6, "silu(x) * y"},
    {"gelu_and_mul", R"(gelu\s*\([^)]*\)\s*\*)", 1.2, "gelu(x) * y"},
    {"gemm", R"(F\.linear\(|nn\.functional\.linear\(|torch\.matmul\(|torch\.mm\(|torch\.bmm\(|addmm\(|\s@\s)", 1.0, "matrix product"},
    {"paged_decode_attention", R"(block_table)", 1.0, "block tables"},
    {"paged_decode_attention", R"(key_cache|k_cache|kv_cache)", 0.6, "KV cache"},
    {"paged_decode_attention", R"(scaled_dot_product_attention|softmax)", 0.2, "attention softmax"},
    {"fp8_quant", R"(float8_e4m3|float8_e5m2)", 1.0, "fp8 dtype"},
    {"fp8_quant", R"(amax\(|abs\(\)\s*\.max\()", 0.5, "row absolute max"},
    {"fp8_quant", R"(448|240\.0|finfo\()", 0.3, "fp8 range"},
    {"moe_gating", R"(topk\s*\()", 0.9, "top-k selection"},
    {"moe_gating", R"(softmax\s*\()", 0.2, "softmax before top-k"},
    {"moe_gating", R"(expert|gating)", 0.4, "expert routing words"},
    {"rope", R"(rotate_half|cos\b.*sin\b|sin\b.*cos\b)", 1.0, "rotary cos/sin"},
};

// Patterns whose signals are also part of a larger pattern give way to it.
const std::map<std::string, std::vector<std::string>> kSubsumedBy = {
    {"rms_norm", {"fused_add_rms_norm"}},
    {"softmax", {"moe_gating", "paged_decode_attention"}},
    {"gemm", {"paged_decode_attention"}},
    {"silu_and_mul", {}},
};

const char* kKnownPatterns[] = {"rms_norm", "fused_add_rms_norm", "layer_norm", "softmax", "silu_and_mul", "gelu_and_mul",
                                "gemm", "paged_decode_attention", "fp8_quant", "moe_gating", "rope", "row_reduce"};

std::string canonical(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return c == '-' ? '_' : static_cast<char>(std::tolower(c)); });
  static const std::map<std::string, std::string> kAliases = {
      {"rmsnorm", "rms_norm"}, {"fused_add_rmsnorm", "fused_add_rms_norm"}, {"layernorm", "layer_norm"},
      {"linear", "gemm"}, {"matmul", "gemm"}, {"decode_attention", "paged_decode_attention"},
      {"paged_attention", "paged_decode_attention"}, {"fp8_per_token_quant", "fp8_quant"}, {"quantization", "fp8_quant"},
      {"moe_topk_gating_softmax", "moe_gating"}, {"topk_gating", "moe_gating"}, {"gated_activation", "silu_and_mul"},
      {"swiglu", "silu_and_mul"}, {"rotary", "rope"}};
  if (auto it = kAliases.find(name); it != kAliases.end()) return it->second;
  return name;
}

}  // namespace

PatternGuess detect_pattern(const Task& task) {
  PatternGuess guess;
  std::map<std::string, double> score;
  std::map<std::string, std::vector<std::string>> evidence;
  if (!task.reference.empty()) {
    const std::string source = detail::reference_source(task);
    for (const auto& s : kSignals) {
      const RE2 re(s.regex);
      if (RE2::PartialMatch(source, re)) {
        score[s.pattern] += s.weight;
        evidence[s.pattern].push_back(s.evidence);
      }
    }
    for (const auto& [pattern, bigger] : kSubsumedBy)
      for (const auto& b : bigger)
        if (score[b] >= 0.9) score[pattern] = 0;
    // A residual update with norm evidence is the fused pattern.
    if (score["fused_add_rms_norm"] > 0 && score["rms_norm"] == 0 && evidence["rms_norm"].empty()) score["fused_add_rms_norm"] *= 0.5;
    // A plain reduction of an input is named only when nothing else is in sight outside its call
    // (torch.amax(x, -1) alone is not fp8 evidence): norms, softmax, fp8 scales and routing
    // reduce rows too, and a partial match must not get the wrong kernel.
    if (const auto reduction = detail::detect_row_reduction(task)) {
      const bool other_evidence = std::any_of(std::begin(kSignals), std::end(kSignals), [&](const Signal& s) {
        return RE2::PartialMatch(reduction->source_without_calls, RE2(s.regex));
      });
      if (!other_evidence) {
        score["row_reduce"] = 0.9;
        evidence["row_reduce"].push_back(reduction->evidence);
      }
    }
  }
  std::string best;
  double best_score = 0;
  for (const auto& [pattern, s] : score)
    if (s > best_score) best = pattern, best_score = s;
  const std::string hint = task.pattern_hint.empty() ? "" : canonical(task.pattern_hint);
  const bool hint_known = std::find(std::begin(kKnownPatterns), std::end(kKnownPatterns), hint) != std::end(kKnownPatterns);
  if (hint_known) {
    guess.name = hint;
    guess.confidence = (best == hint || best.empty()) ? 1.0 : 0.7;
    guess.evidence.push_back("named by the task (" + task.pattern_hint + ")");
    if (!best.empty() && best != hint) guess.evidence.push_back("the reference looks like " + best + " instead");
    for (const auto& e : evidence[hint]) guess.evidence.push_back(e);
    return guess;
  }
  if (best.empty() || best_score < 0.9) {
    guess.name = "unknown";
    guess.confidence = 0;
    if (!hint.empty()) guess.evidence.push_back("the task names \"" + task.pattern_hint + "\", which kwiki has no template for");
    if (!best.empty()) guess.evidence.push_back("weak signals for " + best);
    return guess;
  }
  guess.name = best;
  guess.confidence = std::min(1.0, best_score / 1.5);
  guess.evidence = evidence[best];
  return guess;
}

}  // namespace kwiki
