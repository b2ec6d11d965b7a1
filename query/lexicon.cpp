// The intent lexicon (gpu-wiki/lexicon/lexicon.json, embedded at build time) in lookup form.
#include "lexicon.hpp"

#include "tokenize.hpp"

#include <algorithm>
#include <cctype>

#include "kwiki/error.hpp"
#include "text_util.hpp"

namespace kwiki::detail {

extern const LexPhrase kLexPhrases[];
extern const std::size_t kLexPhraseCount;
extern const std::size_t kLexLongestPhrase;
extern const char* const kLexiconRestText;

namespace {

std::unique_ptr<LazyRegex> compile(const std::string& pattern) { return std::make_unique<LazyRegex>(pattern); }

}  // namespace

const RE2& LazyRegex::get() const {
  std::call_once(once_, [this] {
    RE2::Options options;
    options.set_case_sensitive(false);
    options.set_log_errors(false);
    re_ = std::make_unique<RE2>(pattern_, options);
    if (!re_->ok()) throw Error(ErrorCode::kInternal, "lexicon pattern does not compile: " + pattern_ + ": " + re_->error());
  });
  return *re_;
}

const char* lex_kind_name(LexKind kind) {
  switch (kind) {
    case LexKind::kProduct: return "product";
    case LexKind::kArch: return "architecture";
    case LexKind::kVendor: return "vendor";
    case LexKind::kDsl: return "dsl";
    case LexKind::kOperator: return "operator";
    case LexKind::kDtype: return "dtype";
    case LexKind::kSymptom: return "symptom";
    case LexKind::kIntent: return "intent";
    case LexKind::kHardwareField: return "hardware_field";
  }
  return "?";
}

std::vector<std::string> Lexicon::tokenize(std::string_view text) { return detail::tokenize(text); }

Lexicon::Lexicon(std::span<const LexPhrase> phrases, std::size_t longest_phrase, const nlohmann::json& doc)
    : phrases_(phrases), longest_phrase_(longest_phrase) {
  try {
    for (const auto& p : doc.at("products")) {
      products_.push_back(KnownProduct{p.at("product"), p.at("vendor"), p.at("arch"), p.value("target", ""), {}});
    }
    for (const auto& a : doc.at("architectures")) {
      const std::string arch = a.at("arch");
      arch_vendor_[arch] = a.at("vendor");
    }
    for (const auto& a : doc.at("recorded_architectures")) recorded_arches_.insert(a.get<std::string>());
    for (const auto& [k, v] : doc.at("targets").at("nvidia").items()) nvidia_targets_[k] = v;
    for (const auto& [k, v] : doc.at("targets").at("amd").items()) amd_targets_[k] = v;
    for (const auto& o : doc.at("operators")) {
      const std::string op = o.at("operator");
      operator_workload_[op] = o.value("workload", "");
      if (o.contains("also"))
        for (const auto& a : o.at("also")) operator_also_[op].push_back(a);
    }
    for (const LexPhrase& entry : phrases_) {
      if (entry.kind != LexKind::kOperator) continue;
      auto& spellings = operator_spellings_[entry.value];
      if (spellings.empty()) spellings.push_back(entry.value);
      std::string spelling = entry.phrase;
      std::replace_if(spelling.begin(), spelling.end(), [](char c) { return c == ' ' || c == '-'; }, '_');
      if (std::find(spellings.begin(), spellings.end(), spelling) == spellings.end()) spellings.push_back(spelling);
    }
    for (const auto& sp : doc.at("symptom_patterns")) {
      SymptomPattern pattern;
      pattern.label = sp.at("label");
      pattern.re = compile(sp.at("pattern"));
      pattern.below = sp.value("below", -1.0);
      pattern.above = sp.value("above", -1.0);
      pattern.what = sp.value("what", "");
      if (sp.contains("requires"))
        for (const auto& r : sp.at("requires")) pattern.requires_any.push_back(r.get<std::string>());
      symptom_patterns_.push_back(std::move(pattern));
    }
    for (const auto& [word, list] : doc.at("synonyms").items())
      for (const auto& s : list) synonyms_[word].push_back(s);
    for (const auto& s : doc.at("stopwords")) stopwords_.insert(s.get<std::string>());
    const auto& patterns = doc.at("patterns");
    nvidia_target_ = compile(patterns.at("nvidia_target"));
    amd_target_ = compile(patterns.at("amd_target"));
    shape_ = compile(patterns.at("shape"));
    mnemonic_ = compile(patterns.at("mnemonic"));
    not_recorded_procedure_ = doc.at("not_recorded_procedure");
    for (const auto& f : doc.at("hardware_fields")) {
      HardwareUse use{f.at("field"), f.value("serves", std::vector<std::string>{}), {}};
      if (f.contains("serves_by_dtype"))
        for (const auto& [dtype, tags] : f.at("serves_by_dtype").items()) use.serves_by_dtype[dtype] = tags.get<std::vector<std::string>>();
      hardware_uses_.push_back(std::move(use));
    }
    for (const auto& [vendor, prefixes] : doc.at("mnemonic_vendors").items())
      for (const auto& prefix : prefixes) mnemonic_vendors_.emplace_back(prefix.get<std::string>(), vendor);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kInternal, std::string("the lexicon is malformed: ") + e.what());
  }
}

const Lexicon& Lexicon::embedded() {
  static const Lexicon lexicon(std::span<const LexPhrase>(kLexPhrases, kLexPhraseCount), kLexLongestPhrase,
                               nlohmann::json::parse(kLexiconRestText));
  return lexicon;
}

std::span<const LexPhrase> Lexicon::lookup(std::string_view phrase) const {
  // The table is sorted by phrase (byte order): the meanings of one phrase are adjacent.
  const auto less = [](const LexPhrase& p, std::string_view key) { return std::string_view(p.phrase) < key; };
  auto first = std::lower_bound(phrases_.begin(), phrases_.end(), phrase, less);
  auto last = first;
  while (last != phrases_.end() && std::string_view(last->phrase) == phrase) ++last;
  return {first, last};
}

std::string Lexicon::nearest_word(const std::string& word) const {
  if (word.size() < kMinCorrectedWord) return {};
  const std::size_t allowed = word.size() >= 8 ? 2 : 1;
  // Letters added or removed at an end make another word (bilinear, linear), not a typo.
  auto extends = [](std::string_view longer, std::string_view shorter) {
    return longer.size() >= shorter.size() + 2 && (longer.starts_with(shorter) || longer.ends_with(shorter));
  };
  std::string best;
  std::size_t best_distance = allowed + 1;
  for (const LexPhrase& entry : phrases_) {
    const std::string_view phrase = entry.phrase;
    if (phrase.find(' ') != std::string::npos || phrase.size() + allowed < word.size() || phrase.size() > word.size() + allowed) continue;
    if (entry.kind == LexKind::kIntent || phrase.empty() || phrase.front() != word.front()) continue;  // typos spare the first letter
    if (extends(word, phrase) || extends(phrase, word)) continue;
    const std::size_t d = edit_distance(word, phrase);
    if (d < best_distance || (d == best_distance && phrase < best)) {
      best_distance = d;
      best = std::string(phrase);
    }
  }
  return best_distance <= allowed ? best : std::string();
}

std::string Lexicon::vendor_of_mnemonic(const std::string& mnemonic) const {
  for (const auto& [prefix, vendor] : mnemonic_vendors_)
    if (mnemonic.rfind(prefix, 0) == 0) return vendor;
  return {};
}

std::vector<std::string> Lexicon::hardware_serves(const std::string& field) const {
  static constexpr std::string_view kDtype = "{dtype}";
  for (const auto& use : hardware_uses_) {
    const auto pos = use.field.find(kDtype);
    if (pos == std::string::npos) {
      if (use.field == field) return use.serves;
      continue;
    }
    const std::string_view head = std::string_view(use.field).substr(0, pos), tail = std::string_view(use.field).substr(pos + kDtype.size());
    if (field.size() <= head.size() + tail.size() || !field.starts_with(head) || !field.ends_with(tail)) continue;
    const std::string dtype = field.substr(head.size(), field.size() - head.size() - tail.size());
    if (dtype.find('.') != std::string::npos) continue;
    std::vector<std::string> out = use.serves;
    if (auto it = use.serves_by_dtype.find(dtype); it != use.serves_by_dtype.end()) out.insert(out.end(), it->second.begin(), it->second.end());
    return out;
  }
  return {};
}

const KnownProduct* Lexicon::product(const std::string& slug) const {
  for (const auto& p : products_)
    if (p.product == slug) return &p;
  return nullptr;
}

std::string Lexicon::arch_of_target(const std::string& vendor, const std::string& number) const {
  const auto& table = vendor == "nvidia" ? nvidia_targets_ : amd_targets_;
  auto it = table.find(number);
  return it == table.end() ? "" : it->second;
}

std::string Lexicon::vendor_of_arch(const std::string& arch) const {
  auto it = arch_vendor_.find(arch);
  return it == arch_vendor_.end() ? "" : it->second;
}

const std::vector<std::string>* Lexicon::synonyms(const std::string& token) const {
  auto it = synonyms_.find(token);
  return it == synonyms_.end() ? nullptr : &it->second;
}

std::vector<std::string> Lexicon::operator_also(const std::string& op) const {
  auto it = operator_also_.find(op);
  return it == operator_also_.end() ? std::vector<std::string>{} : it->second;
}

std::string Lexicon::workload_of(const std::string& op) const {
  auto it = operator_workload_.find(op);
  return it == operator_workload_.end() ? "" : it->second;
}

const std::vector<std::string>& Lexicon::operator_spellings(const std::string& op) const {
  static const std::vector<std::string> kNone;
  auto it = operator_spellings_.find(op);
  return it == operator_spellings_.end() ? kNone : it->second;
}

}  // namespace kwiki::detail
