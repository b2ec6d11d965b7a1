// The record model: one corpus record as kwiki stores and serves it.
#pragma once

#include <string>
#include <vector>

namespace kwiki {

/// Name of the public store and of the private (internal) store.
inline constexpr const char* kPublicStore = "gpu_wiki";
inline constexpr const char* kInternalStore = "internal_gpu_wiki";
/// Prefix that namespaces private record ids in answers: "internal_gpu_wiki::<id>".
inline constexpr const char* kInternalPrefix = "internal_gpu_wiki::";

/// One indexed record. `key` is unique in an index; `id` is the record's own id.
struct Record {
  std::string key;              ///< id, or internal_gpu_wiki::id for the private store
  std::string id;               ///< the record's "id" field
  std::string store;            ///< gpu_wiki | internal_gpu_wiki
  std::string source;           ///< hardware_wiki | kernel_wiki
  std::string schema;           ///< hw-1.0 | clean-1.3
  std::string type;             ///< spec-sheet, technique-card, ...
  std::string vendor;           ///< nvidia | amd | generic
  std::string arch;             ///< hopper, cdna3, ..., generic
  std::string product;          ///< product slug or empty
  std::string dsl;              ///< cuda, hip, ..., any (empty for hardware records)
  std::string operator_family;  ///< rmsnorm, gemm, ... or empty
  std::string level;            ///< operator | cross-operator | generic (kernel records)
  std::string status;           ///< current/active/superseded/...
  std::string applies_to_json;  ///< JSON object: the record's scope, as served
  std::string payload;          ///< served payload, byte-identical to the file's text
  std::string confidence;       ///< evidence.summary.confidence (kernel records)
  std::string tier;             ///< worth.rank.tier (kernel records)
  double worth = 0.5;           ///< worth.rank.score, the ranking prior
  std::string path;             ///< file path relative to its corpus root
  std::string root;             ///< the corpus root it came from

  std::vector<std::string> operators;  ///< scope.operators and operator_family
  std::vector<std::string> symptoms;   ///< signals.symptoms
  std::vector<std::string> tags;       ///< technique tags, mnemonic, feature
  std::vector<std::string> products;   ///< products it applies to
  std::vector<std::string> aliases;    ///< product spellings (spec sheets)
  std::vector<std::string> links;      ///< ids it links to (retrieval.links see_also, cited_records)
  std::string workload_family;         ///< generality.workload_family
  std::string title_text;              ///< high-weight free text (goal, title, triggers)
  std::string body_text;               ///< the rest of the served free text
};

/// One flattened hardware fact: `path` is a dot path into facts (peak_compute.bf16.dense).
struct HardwareFact {
  std::string path;
  std::string value_json;  ///< the JSON value as text
  double number = 0;       ///< numeric value when is_number
  bool is_number = false;
  std::string unit;        ///< TFLOPS, TB/s, GB, MB, KB, MHz, W, ... or empty
  std::string evidence;    ///< evidence class behind it
};

}  // namespace kwiki
