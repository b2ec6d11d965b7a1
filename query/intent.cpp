// Deterministic intent extraction: lexicon phrases by longest match, RE2 for numbers and targets.
#include "kwiki/intent.hpp"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "kwiki/error.hpp"
#include "lexicon.hpp"
#include "text_util.hpp"

namespace kwiki {
namespace {

using detail::LexEntry;
using detail::LexKind;
using detail::Lexicon;
using detail::push_unique;

constexpr std::size_t kMaxRequestBytes = 8192;  // longer requests are read up to here; said in notes
constexpr std::size_t kMaxFreeTerms = 32;

// Sets vendor/arch from the first architecture mentioned; a later one of the same vendor (a
// comparison, a port) joins the exact scope; one of another vendor never does.
void set_arch(Intent& intent, const Lexicon& lex, const std::string& arch) {
  if (intent.arch.empty()) {
    intent.arch = arch;
    if (intent.vendor.empty()) intent.vendor = lex.vendor_of_arch(arch);
  } else if (arch != intent.arch && lex.vendor_of_arch(arch) == lex.vendor_of_arch(intent.arch)) {
    push_unique(intent.also_arches, arch);
  }
}

void apply_entry(Intent& intent, const Lexicon& lex, const LexEntry& entry) {
  struct {
    LexKind kind;
    std::string value;
  } e{entry.kind, entry.value};
  switch (e.kind) {
    case LexKind::kProduct: {
      push_unique(intent.products, e.value);
      if (const auto* p = lex.product(e.value)) {
        set_arch(intent, lex, p->arch);
        if (intent.vendor.empty()) intent.vendor = p->vendor;
        if (intent.target.empty()) intent.target = p->target;
      }
      break;
    }
    case LexKind::kArch: set_arch(intent, lex, e.value); break;
    case LexKind::kVendor:
      if (intent.vendor.empty()) intent.vendor = e.value;
      break;
    case LexKind::kDsl: push_unique(intent.dsls, e.value); break;
    case LexKind::kOperator:
      push_unique(intent.operators, e.value);
      for (const auto& also : lex.operator_also(e.value)) push_unique(intent.operators, also);
      break;
    case LexKind::kDtype: push_unique(intent.dtypes, e.value); break;
    case LexKind::kSymptom: push_unique(intent.symptoms, e.value); break;
    case LexKind::kIntent: push_unique(intent.intents, e.value); break;
    case LexKind::kHardwareField: push_unique(intent.hardware_fields, e.value); break;
  }
}

std::string sanitize(std::string_view request, bool& truncated) {
  truncated = request.size() > kMaxRequestBytes;
  std::string text(request.substr(0, kMaxRequestBytes));
  // Control bytes carry no meaning here; they become spaces.
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  return text;
}

void extract_targets(Intent& intent, const Lexicon& lex, const std::string& lower) {
  re2::StringPiece input(lower);
  const bool maybe_sm = lower.find("sm") != std::string::npos;
  const bool maybe_gfx = lower.find("gfx") != std::string::npos;
  std::string number, suffix;
  while (maybe_sm && RE2::FindAndConsume(&input, lex.nvidia_target(), &number, &suffix)) {
    const std::string arch = lex.arch_of_target("nvidia", number);
    const std::string target = "sm_" + number + suffix;
    if (intent.target.empty()) intent.target = target;
    if (intent.vendor.empty()) intent.vendor = "nvidia";
    if (arch.empty()) {
      if (intent.unresolved_arch.empty()) intent.unresolved_arch = target;
    } else {
      set_arch(intent, lex, arch);
    }
  }
  input = re2::StringPiece(lower);
  std::string features;
  while (maybe_gfx && RE2::FindAndConsume(&input, lex.amd_target(), &number, &features)) {
    const std::string arch = lex.arch_of_target("amd", number);
    const std::string target = "gfx" + number + features;
    if (intent.target.empty()) intent.target = target;
    if (intent.vendor.empty()) intent.vendor = "amd";
    if (arch.empty()) {
      if (intent.unresolved_arch.empty()) intent.unresolved_arch = target;
    } else {
      set_arch(intent, lex, arch);
    }
  }
}

void extract_measured(Intent& intent, const Lexicon& lex, const std::string& lower) {
  // Every symptom pattern reads a number: no digit, nothing to do.
  if (lower.find_first_of("0123456789") == std::string::npos) return;
  for (const auto& pattern : lex.symptom_patterns()) {
    const bool possible = pattern.requires_any.empty() ||
                          std::any_of(pattern.requires_any.begin(), pattern.requires_any.end(),
                                      [&](const std::string& word) { return lower.find(word) != std::string::npos; });
    if (!possible) continue;  // its pattern is never compiled for this request
    re2::StringPiece input(lower);
    std::string number;
    const char* before = input.data();
    while (RE2::FindAndConsume(&input, pattern.re->get(), &number)) {
      MeasuredSymptom m;
      m.label = pattern.label;
      m.value = std::strtod(number.c_str(), nullptr);
      // The matched text is what the pattern consumed; find it for the explanation.
      m.text = std::string(before, static_cast<std::size_t>(input.data() - before));
      while (!m.text.empty() && m.text.front() == ' ') m.text.erase(m.text.begin());
      const std::size_t cut = m.text.find_last_of(' ', m.text.size() > 40 ? m.text.size() - 40 : 0);
      if (m.text.size() > 40 && cut != std::string::npos) m.text = m.text.substr(cut + 1);
      m.applies = (pattern.below < 0 || m.value < pattern.below) && (pattern.above < 0 || m.value > pattern.above);
      if (m.applies) push_unique(intent.symptoms, m.label);
      intent.measured.push_back(std::move(m));
      before = input.data();
    }
  }
}

}  // namespace

std::vector<std::string> Intent::exact_arches() const {
  std::vector<std::string> out;
  if (!arch.empty()) out.push_back(arch);
  out.insert(out.end(), also_arches.begin(), also_arches.end());
  return out;
}

bool Intent::hardware_only() const {
  return wants_hardware() && operators.empty() && symptoms.empty() && dsls.empty() && mnemonics.empty() &&
         std::none_of(intents.begin(), intents.end(), [](const std::string& i) { return i != "documentation"; });
}

nlohmann::ordered_json Intent::to_json() const {
  nlohmann::ordered_json j;
  j["products"] = products;
  j["vendor"] = vendor.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(vendor);
  j["architecture"] = arch.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(arch);
  if (!also_arches.empty()) j["also_architectures"] = also_arches;
  j["target"] = target.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(target);
  if (!unresolved_arch.empty()) j["unresolved_architecture"] = unresolved_arch;
  j["dsl"] = dsls;
  j["operators"] = operators;
  j["dtypes"] = dtypes;
  j["symptoms"] = symptoms;
  nlohmann::ordered_json measured_json = nlohmann::ordered_json::array();
  for (const auto& m : measured)
    measured_json.push_back({{"text", m.text}, {"label", m.label}, {"value", m.value}, {"applies", m.applies}});
  j["measured_symptoms"] = measured_json;
  j["intents"] = intents;
  j["hardware_requests"] = hardware_fields;
  j["mnemonics"] = mnemonics;
  j["shapes"] = shapes;
  j["free_text_terms"] = free_terms;
  return j;
}

Intent extract_intent(std::string_view request) {
  const Lexicon& lex = Lexicon::embedded();
  Intent intent;
  bool truncated = false;
  const std::string text = sanitize(request, truncated);
  if (truncated) intent.notes.push_back("request longer than " + std::to_string(kMaxRequestBytes) + " bytes; read the first " +
                                        std::to_string(kMaxRequestBytes));
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });

  extract_targets(intent, lex, lower);
  extract_measured(intent, lex, lower);
  {
    re2::StringPiece input(lower);
    std::string mnemonic;
    const bool maybe_mnemonic = lower.find_first_of("._") != std::string::npos || lower.find("wgmma") != std::string::npos ||
                                lower.find("mapa") != std::string::npos || lower.find("ldmatrix") != std::string::npos ||
                                lower.find("stmatrix") != std::string::npos || lower.find("setmaxnreg") != std::string::npos ||
                                lower.find("tcgen05") != std::string::npos || lower.find("mbarrier") != std::string::npos;
    while (maybe_mnemonic && RE2::FindAndConsume(&input, lex.mnemonic(), &mnemonic)) push_unique(intent.mnemonics, mnemonic);
    input = re2::StringPiece(lower);
    std::string shape;
    const bool maybe_shape = lower.find_first_of("x*\xc3") != std::string::npos && lower.find_first_of("0123456789") != std::string::npos;
    while (maybe_shape && RE2::FindAndConsume(&input, lex.shape(), &shape)) {
      shape.erase(std::remove(shape.begin(), shape.end(), ' '), shape.end());
      push_unique(intent.shapes, shape);
    }
  }

  // Longest-match phrase lookup over the token stream; unmatched content words are free text.
  const std::vector<std::string> tokens = Lexicon::tokenize(lower);
  for (std::size_t i = 0; i < tokens.size();) {
    std::size_t matched = 0;
    for (std::size_t n = std::min(lex.longest_phrase(), tokens.size() - i); n >= 1; --n) {
      std::string phrase = tokens[i];
      for (std::size_t k = 1; k < n; ++k) phrase += " " + tokens[i + k];
      const auto entries = lex.lookup(phrase);
      if (!entries.empty()) {
        for (const auto& e : entries) apply_entry(intent, lex, e);
        matched = n;
        break;
      }
    }
    if (matched == 0) {
      const std::string& t = tokens[i];
      // A hex literal (0x80, an fp8 NaN byte) is a word the records use, not a number to drop.
      const bool hex = t.size() > 2 && t.starts_with("0x");
      const bool numeric = !hex && t.find_first_not_of("0123456789.x%") == std::string::npos;
      // Targets (sm_90a, gfx942:...) were read by the target patterns already.
      static const RE2 kTargetToken("(sm_?\\d+[af]?|gfx\\w+(:[a-z]+[+-])*)");
      const bool target = RE2::FullMatch(t, kTargetToken);
      if (!lex.is_stopword(t) && !numeric && !target && t.size() > 1 && t.size() <= 64 && intent.free_terms.size() < kMaxFreeTerms)
        push_unique(intent.free_terms, t);
      matched = 1;
    }
    i += matched;
  }
  // A peak request names its dtype: "bf16 peak" -> peak_compute.bf16.dense (bf16 when none).
  for (auto& field : intent.hardware_fields) {
    const auto pos = field.find("{dtype}");
    if (pos != std::string::npos) field.replace(pos, 7, intent.dtypes.empty() ? "bf16" : intent.dtypes.front());
  }
  if (!intent.mnemonics.empty()) push_unique(intent.intents, "documentation");
  // An ISA mnemonic names its vendor: v_mfma_* is AMD, wgmma is NVIDIA.
  if (intent.vendor.empty())
    for (const auto& m : intent.mnemonics)
      if (intent.vendor.empty()) intent.vendor = lex.vendor_of_mnemonic(m);
  if (intent.intents.empty() && !intent.symptoms.empty()) intent.intents.push_back("diagnosis");
  // Products of two vendors named (porting, comparing): no vendor boundary; the named products'
  // architectures are the exact scope, in the order named.
  std::set<std::string> vendors;
  for (const auto& p : intent.products)
    if (const auto* kp = lex.product(p)) vendors.insert(kp->vendor);
  if (vendors.size() > 1) {
    intent.vendor.clear();
    intent.arch.clear();
    intent.also_arches.clear();
    for (const auto& p : intent.products) {
      const auto* kp = lex.product(p);
      if (kp == nullptr || kp->arch.empty()) continue;
      if (intent.arch.empty()) intent.arch = kp->arch;
      else if (kp->arch != intent.arch) push_unique(intent.also_arches, kp->arch);
    }
    intent.notes.push_back("products of two vendors named; records of both are eligible");
  }
  // An architecture known but holding no records in kwiki leaves the exact scope: the vendor
  // boundary stays, never the neighbour's records.
  std::vector<std::string> named = intent.exact_arches();
  const auto unrecorded = [&](const std::string& a) { return !lex.arch_recorded(a); };
  const auto first_unrecorded = std::find_if(named.begin(), named.end(), unrecorded);
  const bool dropped = first_unrecorded != named.end();
  if (dropped) intent.unresolved_arch = *first_unrecorded;
  std::erase_if(named, unrecorded);
  intent.arch = named.empty() ? std::string() : named.front();
  intent.also_arches.assign(named.begin() + (named.empty() ? 0 : 1), named.end());
  if (!intent.unresolved_arch.empty() && (intent.arch.empty() || dropped))
    intent.notes.push_back("architecture " + intent.unresolved_arch + " has no records in kwiki; kept the " +
                           (intent.vendor.empty() ? std::string("vendor") : intent.vendor) + " boundary");
  return intent;
}

Intent intent_from_upstream(const nlohmann::json& slots) {
  if (!slots.is_object()) throw Error(ErrorCode::kBadInput, "an intent must be a JSON object", "", "/");
  const Lexicon& lex = Lexicon::embedded();
  auto strings = [&](const char* key) {
    std::vector<std::string> out;
    auto it = slots.find(key);
    if (it == slots.end() || it->is_null()) return out;
    if (!it->is_array()) throw Error(ErrorCode::kBadInput, std::string("slot ") + key + " must be an array of strings", "", std::string("/") + key);
    for (std::size_t i = 0; i < it->size(); ++i) {
      if (!(*it)[i].is_string())
        throw Error(ErrorCode::kBadInput, std::string("slot ") + key + " must hold strings", "", std::string("/") + key + "/" + std::to_string(i));
      out.push_back((*it)[i].get<std::string>());
    }
    return out;
  };
  auto string_slot = [&](const char* key) -> std::string {
    auto it = slots.find(key);
    if (it == slots.end() || it->is_null()) return "";
    if (!it->is_string()) throw Error(ErrorCode::kBadInput, std::string("slot ") + key + " must be a string or null", "", std::string("/") + key);
    return it->get<std::string>();
  };
  // Each slot is read through the same extraction as prose, so spellings resolve identically.
  std::string prose = string_slot("architecture") + " . " + string_slot("vendor") + " . " + string_slot("dsl");
  for (const auto& t : strings("operator_terms")) prose += " . " + t;
  for (const auto& t : strings("measured_symptoms")) prose += " . " + t;
  for (const auto& t : strings("hardware_requests")) prose += " . " + t;
  Intent intent = extract_intent(prose);
  for (const auto& t : strings("free_text_terms"))
    for (const auto& token : Lexicon::tokenize(t))
      if (!lex.is_stopword(token)) push_unique(intent.free_terms, token);
  for (const auto& i : strings("intents")) push_unique(intent.intents, i);
  return intent;
}

}  // namespace kwiki
