// The intent lexicon (gpu-wiki/lexicon/lexicon.json, embedded at build time) in lookup form.
#include "lexicon.hpp"

#include <algorithm>
#include <cctype>

#include "kwiki/error.hpp"

namespace kwiki::detail {

extern const char* const kLexiconText;

namespace {

std::unique_ptr<RE2> compile(const std::string& pattern) {
  RE2::Options options;
  options.set_case_sensitive(false);
  options.set_log_errors(false);
  auto re = std::make_unique<RE2>(pattern, options);
  if (!re->ok()) throw Error(ErrorCode::kInternal, "lexicon pattern does not compile: " + pattern + ": " + re->error());
  return re;
}

bool is_token_char(unsigned char c) {
  return std::isalnum(c) || c == '_' || c == '.' || c == '+' || c == ':' || c == '/' || c == '#' || c >= 0x80;
}

}  // namespace

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

std::vector<std::string> Lexicon::tokenize(std::string_view text) {
  std::vector<std::string> tokens;
  std::string current;
  auto flush = [&] {
    // Sentence punctuation is not part of a token: "rmsnorm." -> "rmsnorm".
    while (!current.empty() && (current.back() == '.' || current.back() == ':' || current.back() == '/' ||
                                current.back() == '#'))
      current.pop_back();
    while (!current.empty() && (current.front() == '.' || current.front() == ':' || current.front() == '/' ||
                                current.front() == '+' || current.front() == '#'))
      current.erase(current.begin());
    if (!current.empty()) tokens.push_back(std::move(current));
    current.clear();
  };
  for (unsigned char c : text) {
    if (is_token_char(c)) current += static_cast<char>(std::tolower(c));
    else flush();
  }
  flush();
  return tokens;
}

void Lexicon::add_phrase(const std::string& name, LexKind kind, const std::string& value) {
  const auto tokens = tokenize(name);
  if (tokens.empty()) return;
  std::string key;
  for (const auto& t : tokens) key += (key.empty() ? "" : " ") + t;
  auto& entries = phrases_[key];
  for (const auto& e : entries)
    if (e.kind == kind && e.value == value) return;
  entries.push_back({kind, value});
  longest_phrase_ = std::max(longest_phrase_, tokens.size());
}

Lexicon::Lexicon(const nlohmann::json& doc) {
  try {
    for (const auto& p : doc.at("products")) {
      KnownProduct kp{p.at("product"), p.at("vendor"), p.at("arch"), p.value("target", ""), {}};
      for (const auto& n : p.at("names")) {
        kp.names.push_back(n);
        add_phrase(n, LexKind::kProduct, kp.product);
      }
      add_phrase(kp.product, LexKind::kProduct, kp.product);
      products_.push_back(std::move(kp));
    }
    for (const auto& a : doc.at("architectures")) {
      const std::string arch = a.at("arch");
      arch_vendor_[arch] = a.at("vendor");
      add_phrase(arch, LexKind::kArch, arch);
      for (const auto& n : a.at("names")) add_phrase(n, LexKind::kArch, arch);
    }
    for (const auto& a : doc.at("recorded_architectures")) recorded_arches_.insert(a.get<std::string>());
    for (const auto& [k, v] : doc.at("targets").at("nvidia").items()) nvidia_targets_[k] = v;
    for (const auto& [k, v] : doc.at("targets").at("amd").items()) amd_targets_[k] = v;
    for (const auto& [vendor, names] : doc.at("vendors").items())
      for (const auto& n : names) add_phrase(n, LexKind::kVendor, vendor);
    for (const auto& f : doc.at("frameworks"))
      for (const auto& n : f.at("names")) add_phrase(n, LexKind::kDsl, f.at("dsl"));
    for (const auto& o : doc.at("operators")) {
      const std::string op = o.at("operator");
      operator_workload_[op] = o.value("workload", "");
      add_phrase(op, LexKind::kOperator, op);
      for (const auto& n : o.at("names")) add_phrase(n, LexKind::kOperator, op);
      if (o.contains("also"))
        for (const auto& a : o.at("also")) operator_also_[op].push_back(a);
    }
    for (const auto& [dtype, names] : doc.at("dtypes").items())
      for (const auto& n : names) add_phrase(n, LexKind::kDtype, dtype);
    for (const auto& s : doc.at("symptoms")) {
      add_phrase(s.at("label"), LexKind::kSymptom, s.at("label"));
      for (const auto& n : s.at("names")) add_phrase(n, LexKind::kSymptom, s.at("label"));
    }
    for (const auto& sp : doc.at("symptom_patterns")) {
      SymptomPattern pattern;
      pattern.label = sp.at("label");
      pattern.re = compile(sp.at("pattern"));
      pattern.below = sp.value("below", -1.0);
      pattern.above = sp.value("above", -1.0);
      pattern.what = sp.value("what", "");
      symptom_patterns_.push_back(std::move(pattern));
    }
    for (const auto& [intent, names] : doc.at("intents").items())
      for (const auto& n : names) add_phrase(n, LexKind::kIntent, intent);
    for (const auto& f : doc.at("hardware_fields"))
      for (const auto& n : f.at("names")) add_phrase(n, LexKind::kHardwareField, f.at("field"));
    for (const auto& [word, list] : doc.at("synonyms").items())
      for (const auto& s : list) synonyms_[word].push_back(s);
    for (const auto& s : doc.at("stopwords")) stopwords_.insert(s.get<std::string>());
    const auto& patterns = doc.at("patterns");
    nvidia_target_ = compile(patterns.at("nvidia_target"));
    amd_target_ = compile(patterns.at("amd_target"));
    shape_ = compile(patterns.at("shape"));
    mnemonic_ = compile(patterns.at("mnemonic"));
    not_recorded_procedure_ = doc.at("not_recorded_procedure");
    for (const auto& [vendor, prefixes] : doc.at("mnemonic_vendors").items())
      for (const auto& prefix : prefixes) mnemonic_vendors_.emplace_back(prefix.get<std::string>(), vendor);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kInternal, std::string("the lexicon is malformed: ") + e.what());
  }
}

const Lexicon& Lexicon::embedded() {
  static const Lexicon lexicon(nlohmann::json::parse(kLexiconText));
  return lexicon;
}

const std::vector<LexEntry>* Lexicon::lookup(const std::string& phrase) const {
  auto it = phrases_.find(phrase);
  return it == phrases_.end() ? nullptr : &it->second;
}

std::string Lexicon::nearest_word(const std::string& word) const {
  if (word.size() < 5) return {};
  const std::size_t allowed = word.size() >= 7 ? 2 : 1;
  std::string best;
  std::size_t best_distance = allowed + 1;
  for (const auto& [phrase, entries] : phrases_) {
    if (phrase.find(' ') != std::string::npos || phrase.size() + allowed < word.size() || phrase.size() > word.size() + allowed) continue;
    if (entries.front().kind == LexKind::kIntent) continue;
    // Levenshtein distance, rows of the shorter word.
    std::vector<std::size_t> prev(phrase.size() + 1), cur(phrase.size() + 1);
    for (std::size_t j = 0; j <= phrase.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= word.size(); ++i) {
      cur[0] = i;
      for (std::size_t j = 1; j <= phrase.size(); ++j)
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (word[i - 1] == phrase[j - 1] ? 0 : 1)});
      std::swap(prev, cur);
    }
    const std::size_t d = prev[phrase.size()];
    if (d < best_distance || (d == best_distance && phrase < best)) {
      best_distance = d;
      best = phrase;
    }
  }
  return best_distance <= allowed ? best : std::string();
}

std::string Lexicon::vendor_of_mnemonic(const std::string& mnemonic) const {
  for (const auto& [prefix, vendor] : mnemonic_vendors_)
    if (mnemonic.rfind(prefix, 0) == 0) return vendor;
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

}  // namespace kwiki::detail
