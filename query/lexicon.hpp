// The intent lexicon (gpu-wiki/lexicon/lexicon.json, embedded at build time) in lookup form.
#pragma once

#include <re2/re2.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kwiki::detail {

/// What a phrase of the lexicon names.
enum class LexKind { kProduct, kArch, kVendor, kDsl, kOperator, kDtype, kSymptom, kIntent, kHardwareField };

/// One meaning of a phrase: its kind and the canonical value (product slug, dsl, label, ...).
struct LexEntry {
  LexKind kind;
  std::string value;
};

/// A product the lexicon knows (recorded in the corpus or not).
struct KnownProduct {
  std::string product, vendor, arch, target;
  std::vector<std::string> names;
};

/// A numeric symptom pattern, e.g. "(\d+)% of DRAM bandwidth" -> memory-bound below 85.
struct SymptomPattern {
  std::string label;
  std::unique_ptr<RE2> re;
  double below = -1;  ///< label applies when the number is below this (negative: always)
  double above = -1;  ///< label applies when the number is above this (negative: always)
  std::string what;
};

/// The loaded lexicon. Immutable and thread-safe after load.
class Lexicon {
 public:
  /// The embedded lexicon, parsed once per process.
  static const Lexicon& embedded();
  /// Parses a lexicon document; throws kwiki::Error on a malformed one.
  explicit Lexicon(const nlohmann::json& doc);

  /// Lowercases and splits text into tokens the way phrases are matched.
  static std::vector<std::string> tokenize(std::string_view text);

  const std::vector<LexEntry>* lookup(const std::string& phrase) const;
  /// The single-word phrase nearest to `word` (one edit, two for words of 7+ letters), or "".
  std::string nearest_word(const std::string& word) const;
  std::size_t longest_phrase() const { return longest_phrase_; }
  const KnownProduct* product(const std::string& slug) const;
  const std::vector<KnownProduct>& products() const { return products_; }
  /// Architecture family of an sm_XX / gfxNNN number, or "" when unknown.
  std::string arch_of_target(const std::string& vendor, const std::string& number) const;
  /// Vendor of an architecture family, or "".
  std::string vendor_of_arch(const std::string& arch) const;
  bool arch_recorded(const std::string& arch) const { return recorded_arches_.contains(arch); }
  bool is_stopword(const std::string& token) const { return stopwords_.contains(token); }
  const std::vector<std::string>* synonyms(const std::string& token) const;
  /// Operators implied by an operator (fused-add-rmsnorm -> rmsnorm).
  std::vector<std::string> operator_also(const std::string& op) const;
  std::string workload_of(const std::string& op) const;
  const std::vector<SymptomPattern>& symptom_patterns() const { return symptom_patterns_; }
  const RE2& nvidia_target() const { return *nvidia_target_; }
  const RE2& amd_target() const { return *amd_target_; }
  const RE2& shape() const { return *shape_; }
  const RE2& mnemonic() const { return *mnemonic_; }
  /// Vendor whose ISA a mnemonic belongs to (v_mfma -> amd, wgmma -> nvidia), or "".
  std::string vendor_of_mnemonic(const std::string& mnemonic) const;
  const std::string& not_recorded_procedure() const { return not_recorded_procedure_; }

 private:
  void add_phrase(const std::string& name, LexKind kind, const std::string& value);

  std::unordered_map<std::string, std::vector<LexEntry>> phrases_;
  std::size_t longest_phrase_ = 1;
  std::vector<KnownProduct> products_;
  std::unordered_map<std::string, std::string> nvidia_targets_, amd_targets_, arch_vendor_;
  std::unordered_set<std::string> recorded_arches_, stopwords_;
  std::unordered_map<std::string, std::vector<std::string>> synonyms_, operator_also_;
  std::unordered_map<std::string, std::string> operator_workload_;
  std::vector<SymptomPattern> symptom_patterns_;
  std::unique_ptr<RE2> nvidia_target_, amd_target_, shape_, mnemonic_;
  std::string not_recorded_procedure_;
  std::vector<std::pair<std::string, std::string>> mnemonic_vendors_;  // (prefix, vendor)
};

const char* lex_kind_name(LexKind kind);

}  // namespace kwiki::detail
