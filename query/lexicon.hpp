// The intent lexicon (gpu-wiki/lexicon/lexicon.json, embedded at build time) in lookup form.
#pragma once

#include <re2/re2.h>

#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kwiki::detail {

/// What a phrase of the lexicon names.
enum class LexKind { kProduct, kArch, kVendor, kDsl, kOperator, kDtype, kSymptom, kIntent, kHardwareField };

/// One meaning of a phrase: the phrase (tokens joined by spaces), its kind and the canonical
/// value (product slug, dsl, label, ...). Generated tables hold these sorted by phrase.
struct LexPhrase {
  const char* phrase;
  LexKind kind;
  const char* value;
};
using LexEntry = LexPhrase;

/// A product the lexicon knows (recorded in the corpus or not).
struct KnownProduct {
  std::string product, vendor, arch, target;
  std::vector<std::string> names;
};

/// An RE2 pattern compiled on first use (most requests never need most patterns).
class LazyRegex {
 public:
  explicit LazyRegex(std::string pattern) : pattern_(std::move(pattern)) {}
  const RE2& get() const;
  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  mutable std::once_flag once_;
  mutable std::unique_ptr<RE2> re_;
};

/// A numeric symptom pattern, e.g. "(\d+)% of DRAM bandwidth" -> memory-bound below 85.
struct SymptomPattern {
  std::string label;
  std::unique_ptr<LazyRegex> re;
  double below = -1;  ///< label applies when the number is below this (negative: always)
  double above = -1;  ///< label applies when the number is above this (negative: always)
  std::string what;
  std::vector<std::string> requires_any;  ///< cheap prefilter: the text must contain one of these
};

/// The loaded lexicon. Immutable and thread-safe after load.
class Lexicon {
 public:
  /// The embedded lexicon (phrase tables compiled at build time), loaded once per process.
  static const Lexicon& embedded();
  /// Loads the lexicon from its phrase table and the JSON of everything else; throws
  /// kwiki::Error on a malformed one.
  Lexicon(std::span<const LexPhrase> phrases, std::size_t longest_phrase, const nlohmann::json& rest);

  /// Lowercases and splits text into tokens the way phrases are matched.
  static std::vector<std::string> tokenize(std::string_view text);

  /// Every meaning of a phrase (empty when unknown).
  std::span<const LexPhrase> lookup(std::string_view phrase) const;
  /// The single-word phrase `word` is a typo of, or "": words of kMinCorrectedWord letters or
  /// more, one typing edit away (two for words of 8+; a swap of adjacent letters is one), the
  /// same first letter, and never a word that only adds or drops letters at an end (bilinear
  /// is not linear).
  std::string nearest_word(const std::string& word) const;
  /// The shortest word nearest_word() corrects.
  static constexpr std::size_t kMinCorrectedWord = 5;
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
  /// The spellings an operator family has in records' scope.operators ("rms_norm", "matmul"):
  /// the family itself first, then each lexicon name with spaces and hyphens as underscores.
  const std::vector<std::string>& operator_spellings(const std::string& op) const;
  const std::vector<SymptomPattern>& symptom_patterns() const { return symptom_patterns_; }
  const RE2& nvidia_target() const { return nvidia_target_->get(); }
  const RE2& amd_target() const { return amd_target_->get(); }
  const RE2& shape() const { return shape_->get(); }
  const RE2& mnemonic() const { return mnemonic_->get(); }
  /// Vendor whose ISA a mnemonic belongs to (v_mfma -> amd, wgmma -> nvidia), or "".
  std::string vendor_of_mnemonic(const std::string& mnemonic) const;
  const std::string& not_recorded_procedure() const { return not_recorded_procedure_; }
  /// Technique tags of the records a hardware field's number is used by (sm_count ->
  /// wave-quantization): its "serves", plus "serves_by_dtype" for a peak's dtype.
  std::vector<std::string> hardware_serves(const std::string& field) const;

 private:
  std::span<const LexPhrase> phrases_;
  std::size_t longest_phrase_ = 1;
  std::vector<KnownProduct> products_;
  std::unordered_map<std::string, std::string> nvidia_targets_, amd_targets_, arch_vendor_;
  std::unordered_set<std::string> recorded_arches_, stopwords_;
  std::unordered_map<std::string, std::vector<std::string>> synonyms_, operator_also_, operator_spellings_;
  std::unordered_map<std::string, std::string> operator_workload_;
  std::vector<SymptomPattern> symptom_patterns_;
  std::unique_ptr<LazyRegex> nvidia_target_, amd_target_, shape_, mnemonic_;
  std::string not_recorded_procedure_;
  std::vector<std::pair<std::string, std::string>> mnemonic_vendors_;  // (prefix, vendor)
  struct HardwareUse {
    std::string field;  ///< may hold "{dtype}" for one dot-free segment
    std::vector<std::string> serves;
    std::unordered_map<std::string, std::vector<std::string>> serves_by_dtype;
  };
  std::vector<HardwareUse> hardware_uses_;
};

const char* lex_kind_name(LexKind kind);

}  // namespace kwiki::detail
