// A request's intent: what kwiki understood from the prose, before retrieval.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kwiki {

/// A measured symptom with its number ("70% of DRAM peak" -> memory-bound, 70).
struct MeasuredSymptom {
  std::string text;   ///< the words matched
  std::string label;  ///< memory-bound, register-pressure, ...
  double value = 0;
  bool applies = true;  ///< false when the number says the symptom is not present
};

/// Everything extracted from a request. Lists hold canonical values, in order of mention.
struct Intent {
  std::vector<std::string> products;   ///< product slugs (h200-sxm)
  std::string vendor;                  ///< nvidia | amd | "" (unknown)
  std::string arch;                    ///< hopper, cdna3, ... or "" (the first one named)
  std::vector<std::string> also_arches; ///< further architectures of the same vendor named (a comparison, a port)
  std::string target;                  ///< sm_90a, gfx942:sramecc+:xnack-, ... or ""
  std::string unresolved_arch;         ///< an architecture named but not known to kwiki
  std::vector<std::string> dsls;       ///< cuda, hip, cutedsl, triton, ...
  std::vector<std::string> operators;  ///< operator families (rmsnorm, gemm, ...)
  std::vector<std::string> dtypes;     ///< bf16, fp8, ...
  std::vector<std::string> symptoms;   ///< symptom labels
  std::vector<MeasuredSymptom> measured;
  std::vector<std::string> intents;    ///< technique, pitfall, documentation, diagnosis, correctness
  std::vector<std::string> hardware_fields;  ///< field paths, "roofline", "spec", ...
  std::vector<std::string> mnemonics;  ///< ISA mnemonics mentioned (wgmma, v_mfma_...)
  std::vector<std::string> shapes;     ///< "4096x4096x4096", "hidden=5120"
  std::vector<std::string> free_terms; ///< remaining content words, for full-text search
  std::vector<std::string> notes;      ///< what extraction wants the caller to know

  /// The user's exact architecture scope: arch, then also_arches (empty when none).
  std::vector<std::string> exact_arches() const;
  /// True when the request asks for hardware facts.
  bool wants_hardware() const { return !hardware_fields.empty(); }
  /// True when nothing but hardware facts was asked.
  bool hardware_only() const;
  /// The intent as JSON (for --explain and for logs).
  nlohmann::ordered_json to_json() const;
};

/// Extracts the intent of a natural-language request with the embedded lexicon and RE2
/// patterns. Deterministic; never throws for any input bytes (invalid UTF-8 is treated as text).
Intent extract_intent(std::string_view request);

/// Builds an intent from the upstream 8-slot shape (architecture, vendor, dsl, operator_terms,
/// measured_symptoms, free_text_terms, intents, hardware_requests). Throws kwiki::Error
/// (kBadInput, with a JSON pointer) when a slot has the wrong type.
Intent intent_from_upstream(const nlohmann::json& slots);

}  // namespace kwiki
