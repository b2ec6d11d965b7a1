// Exact hardware lookups: product spellings to spec sheets, field paths to values.
#include "hardware_lookup.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <cctype>

#include "sqlite_check.hpp"
#include "text_util.hpp"

namespace kwiki::detail {
namespace {

std::optional<std::pair<std::string, std::string>> alias_target(StatementCache& db, const std::string& alias) {
  Statement& s = db.get("SELECT target,key FROM aliases WHERE alias=?1 AND kind='product' ORDER BY key LIMIT 1");
  s.bind(1, alias);
  if (!s.step()) return std::nullopt;
  return std::make_pair(s.text(0), s.text(1));
}

// Fields that name the same quantity under each vendor's word. A request in one vendor's word
// on the other vendor's sheet answers with the sheet's own field and says so (provenance.alias).
struct FieldAlias {
  const char* nvidia;  // path on NVIDIA sheets
  const char* amd;     // path on AMD sheets
  const char* why;     // how the two relate, for the answer
};
constexpr FieldAlias kFieldAliases[] = {
    {"compute_units.sm_count", "compute_units.cu_count", "an AMD compute unit (CU) is the counterpart of an NVIDIA streaming multiprocessor (SM)"},
    {"power.max_tdp_w", "power.tbp_w", "AMD publishes total board power (TBP) where NVIDIA publishes maximum TDP; both are the board's power limit"},
    {"clocks.max_boost_mhz", "clocks.peak_engine_clock_mhz", "AMD's peak engine clock is the counterpart of NVIDIA's maximum boost clock"},
    {"compute_units.warp_size", "compute_units.wavefront_size", "an AMD wavefront (64 lanes on CDNA) is the counterpart of an NVIDIA warp (32 lanes)"},
    {"compute_units.shared_memory_kb_per_sm", "compute_units.lds_kb_per_cu", "AMD's local data share (LDS) per CU is the counterpart of NVIDIA's shared memory per SM"},
    {"compute_units.tensor_cores", "compute_units.matrix_cores", "AMD matrix cores are the counterpart of NVIDIA tensor cores"},
    {"compute_units.tensor_cores_per_sm", "compute_units.matrix_cores_per_cu", "AMD matrix cores per CU are the counterpart of NVIDIA tensor cores per SM"},
};

// The other vendor's path for a field, with the reason, when the field is one of the pairs.
// A bare leaf ("sm_count") matches the pair's full path too.
std::optional<std::pair<std::string, std::string>> counterpart_field(const std::string& field) {
  auto same = [&](const std::string& path) {
    return field == path || (path.size() > field.size() && path.ends_with("." + field));
  };
  for (const auto& a : kFieldAliases) {
    if (same(a.nvidia)) return std::make_pair(std::string(a.amd), std::string(a.why));
    if (same(a.amd)) return std::make_pair(std::string(a.nvidia), std::string(a.why));
  }
  return std::nullopt;
}

nlohmann::ordered_json sources_of(const Record& sheet) {
  try {
    const auto doc = nlohmann::ordered_json::parse(sheet.payload);
    return doc.at("provenance").at("sources");
  } catch (const std::exception&) {
    return nlohmann::ordered_json::array();
  }
}

}  // namespace

ProductResolution resolve_product(StatementCache& db, const Lexicon& lexicon, const std::string& spelling) {
  ProductResolution r;
  if (auto hit = alias_target(db, normalize_alias(spelling))) {
    r.status = ProductResolution::Status::kRecorded;
    r.product = hit->first;
    r.key = hit->second;
    return r;
  }
  // The lexicon knows more spellings than the sheets list, and products no sheet records.
  const auto tokens = Lexicon::tokenize(spelling);
  std::string phrase;
  for (const auto& t : tokens) phrase += (phrase.empty() ? "" : " ") + t;
  {
    for (const auto& e : lexicon.lookup(phrase)) {
      if (e.kind != LexKind::kProduct) continue;
      r.product = e.value;
      r.key = spec_sheet_key(db, e.value);
      r.status = r.key.empty() ? ProductResolution::Status::kKnownUnrecorded : ProductResolution::Status::kRecorded;
      return r;
    }
  }
  return r;
}

std::string spec_sheet_key(StatementCache& db, const std::string& product) {
  if (auto hit = alias_target(db, normalize_alias(product))) return hit->second;
  return {};
}

std::string base_product(const Record& sheet) {
  try {
    const auto base = nlohmann::json::parse(sheet.payload).at("identity").value("derived_from", nlohmann::json());
    return base.is_string() ? base.get<std::string>() : std::string();
  } catch (const std::exception&) {
    return {};
  }
}

std::vector<std::string> recorded_products(StatementCache& db) {
  Statement& s = db.get("SELECT DISTINCT target FROM aliases WHERE kind='product' ORDER BY target");
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.text(0));
  return out;
}

std::vector<std::string> measured_ceiling_keys(StatementCache& db, const std::string& product) {
  Statement& s = db.get("SELECT key FROM records WHERE type='measured-ceiling' AND product=?1 ORDER BY key");
  s.bind(1, product);
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.text(0));
  return out;
}

std::vector<FactAnswer> lookup_fields(const Store& store, const Record& sheet, const std::string& field) {
  const std::vector<HardwareFact> facts = store.facts(sheet.key);
  const nlohmann::ordered_json sources = sources_of(sheet);
  auto make = [&](const HardwareFact& f) {
    FactAnswer a;
    a.product = sheet.product;
    a.record = sheet.id;
    a.field = f.path;
    a.value = nlohmann::ordered_json::parse(f.value_json);
    a.unit = f.unit;
    a.evidence = f.evidence;
    a.sources = sources;
    return a;
  };
  std::vector<FactAnswer> out;
  if (field == "roofline") {
    const HardwareFact* bandwidth = nullptr;
    for (const auto& f : facts)
      if (f.path == "memory.bandwidth_tb_s" && f.is_number) bandwidth = &f;
    for (const auto& f : facts) {
      // Short paths peak_compute.<dtype>.dense name the matrix-unit row.
      if (!f.is_number || f.path.rfind("peak_compute.", 0) != 0 || !f.path.ends_with(".dense")) continue;
      if (std::count(f.path.begin(), f.path.end(), '.') != 2) continue;
      out.push_back(make(f));
      if (bandwidth && bandwidth->number > 0) {
        const std::string dtype = f.path.substr(13, f.path.size() - 13 - 6);
        FactAnswer ridge = make(f);
        ridge.field = "roofline.ridge_point." + dtype;
        ridge.value = f.number / bandwidth->number;  // TFLOP/s over TB/s = FLOP per byte
        ridge.unit = "FLOP/byte";
        ridge.derivation = f.path + " / memory.bandwidth_tb_s";
        out.push_back(std::move(ridge));
      }
    }
    if (bandwidth) out.push_back(make(*bandwidth));
    return out;
  }
  // A field's own facts; when it has none, its `unavailable` entry (null value, the reason).
  auto answer_field = [&](const std::string& path) {
    std::vector<FactAnswer> found;
    for (const auto& f : facts) {
      if (f.path.rfind("unavailable.", 0) == 0) continue;
      if (f.path == path || (f.path.size() > path.size() && f.path.rfind(path + ".", 0) == 0)) found.push_back(make(f));
    }
    if (found.empty()) {
      for (const auto& f : facts) {
        if (f.path != "unavailable." + path && f.path != "unavailable." + path.substr(0, path.rfind('.')) + ".*") continue;
        FactAnswer a = make(f);
        a.field = path;
        a.value = nullptr;
        a.unit.clear();
        a.derivation = nlohmann::json::parse(f.value_json).get<std::string>();
        found.push_back(std::move(a));
        break;
      }
    }
    return found;
  };
  out = answer_field(field);
  // The other vendor's word for the field: answered with this sheet's own field, said so.
  const bool answered = std::any_of(out.begin(), out.end(), [](const FactAnswer& a) { return !a.value.is_null(); });
  if (answered) return out;
  auto counterpart = counterpart_field(field);
  if (!counterpart) return out;
  std::vector<FactAnswer> aliased = answer_field(counterpart->first);
  if (aliased.empty()) return out;
  const std::string why = field + " is answered by " + (sheet.vendor == "amd" ? "AMD" : "NVIDIA") + " sheets as " + counterpart->first + " (" +
                          counterpart->second + ")";
  for (auto& a : aliased) {
    // A recorded value carries the alias as provenance.alias; an unrecorded one says it in its reason.
    if (a.value.is_null()) a.derivation += " [" + why + "]";
    else a.alias = why;
  }
  return aliased;
}

std::string not_recorded_note(const Lexicon& lexicon, const std::string& product, const std::vector<std::string>& recorded) {
  std::string list;
  for (const auto& p : recorded) list += (list.empty() ? "" : ", ") + p;
  return "product " + product + " is known but not recorded: " + lexicon.not_recorded_procedure() + " Recorded products: " + list + ".";
}

}  // namespace kwiki::detail
