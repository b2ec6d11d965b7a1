// Names a task's compute pattern from its reference's PyTorch calls, with the evidence.
#include <re2/re2.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "kwiki/planner.hpp"

namespace kwiki {
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
                                "gemm", "paged_decode_attention", "fp8_quant", "moe_gating", "rope"};

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
    std::ifstream in(task.reference);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string source = ss.str();
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
