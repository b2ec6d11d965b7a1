// Turns one record file's text into a validated Record, its hardware facts and warnings.
#include "record_builder.hpp"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "json_parse.hpp"
#include "json_text.hpp"
#include "kwiki/error.hpp"
#include "text_util.hpp"

namespace kwiki::detail {
namespace {

using nlohmann::json;

std::string string_or_empty(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return {};
  return it->get<std::string>();
}

// Appends every string under `value` to `out`, skipping keys engine-side or noisy for search.
void collect_text(const json& value, std::string& out) {
  if (value.is_string()) {
    out += value.get_ref<const std::string&>();
    out += '\n';
  } else if (value.is_array()) {
    for (const auto& v : value) collect_text(v, out);
  } else if (value.is_object()) {
    for (const auto& [k, v] : value.items()) {
      // Code is served, not searched: its tokens drown the prose that says when it applies.
      if (k == "provenance" || k == "provenance_overrides" || k == "format" || k == "snippet" ||
          k == "dispatch_snippet" || k == "source_text")
        continue;
      collect_text(v, out);
    }
  } else if (value.is_number()) {
    out += value.dump();
    out += ' ';
  }
}

void warn(std::vector<Diagnostic>& warnings, const RecordLocation& where, std::string pointer, std::string message) {
  warnings.push_back({where.display_path, std::move(pointer), std::move(message), false, 0});
}

// Unit implied by a fact's field name (capacity_gb -> GB).
std::string unit_from_field(const std::string& name) {
  static const std::pair<const char*, const char*> kSuffixes[] = {
      {"_tb_s", "TB/s"}, {"_gb_s", "GB/s"}, {"_gb", "GB"}, {"_mb", "MB"}, {"_kb_per_sm", "KB"},
      {"_kb_per_cu", "KB"}, {"_kb", "KB"}, {"_mhz", "MHz"}, {"_ghz", "GHz"}, {"_w", "W"},
      {"_bits", "bit"}, {"_us", "us"}, {"_ns", "ns"}, {"_bytes", "B"}};
  for (const auto& [suffix, unit] : kSuffixes) {
    const std::string s = suffix;
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) return unit;
  }
  return {};
}

std::string group_evidence(const json& group, const std::string& field, const std::string& fallback) {
  if (group.is_object()) {
    if (auto o = group.find("provenance_overrides"); o != group.end() && o->is_object()) {
      if (auto f = o->find(field); f != o->end() && f->is_string()) return f->get<std::string>();
    }
    if (auto p = group.find("provenance"); p != group.end() && p->is_string()) return p->get<std::string>();
  }
  return fallback;
}

void add_fact(std::vector<HardwareFact>& facts, std::string path, const json& value, std::string unit,
              std::string evidence) {
  HardwareFact fact;
  fact.path = std::move(path);
  fact.value_json = value.dump();
  fact.is_number = value.is_number();
  if (fact.is_number) fact.number = value.get<double>();
  fact.unit = std::move(unit);
  fact.evidence = std::move(evidence);
  facts.push_back(std::move(fact));
}

void flatten_group(std::vector<HardwareFact>& facts, const std::string& prefix, const json& group,
                   const std::string& evidence) {
  for (const auto& [key, value] : group.items()) {
    if (key == "provenance" || key == "provenance_overrides") continue;
    const std::string path = prefix + "." + key;
    if (value.is_object()) {
      flatten_group(facts, path, value, group_evidence(group, key, evidence));
    } else if (!value.is_null()) {
      add_fact(facts, path, value, unit_from_field(key), group_evidence(group, key, evidence));
    }
  }
}

bool is_matrix_unit(const std::string& unit_kind) {
  return unit_kind == "tensor-core" || unit_kind == "matrix-core";
}

// Flattens a spec sheet's facts and checks what a schema cannot: duplicate dtype rows,
// sparse = 2 x dense, bandwidth and capacity present, a sensible ridge point.
void flatten_spec_sheet(const json& facts_json, const std::string& record_evidence, const RecordLocation& where,
                        std::vector<HardwareFact>& facts, std::vector<Diagnostic>& warnings) {
  std::set<std::pair<std::string, std::string>> seen_rows;
  std::map<std::string, std::pair<bool, std::size_t>> short_path_row;  // dtype -> (matrix?, row index)
  const json& rows = facts_json.at("peak_compute");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const json& row = rows[i];
    const std::string dtype = row.at("dtype").get<std::string>();
    const std::string unit_kind = row.at("unit_kind").get<std::string>();
    const std::string unit = row.at("unit").get<std::string>();
    const std::string pointer = "/facts/peak_compute/" + std::to_string(i);
    if (!seen_rows.insert({dtype, unit_kind}).second) {
      warn(warnings, where, pointer, "duplicate peak_compute row for dtype " + dtype + " on " + unit_kind +
                                         "; the first row is served, keep one row per dtype and unit");
      continue;
    }
    const std::string evidence = string_or_empty(row, "provenance").empty() ? record_evidence : row["provenance"].get<std::string>();
    const std::string base = "peak_compute." + dtype + "." + unit_kind;
    for (const char* field : {"dense", "sparse_2to4"}) {
      auto it = row.find(field);
      if (it != row.end() && it->is_number()) add_fact(facts, base + "." + field, *it, unit, evidence);
    }
    auto dense = row.find("dense");
    auto sparse = row.find("sparse_2to4");
    if (dense != row.end() && sparse != row.end() && dense->is_number() && sparse->is_number()) {
      const double d = dense->get<double>(), s = sparse->get<double>();
      if (std::fabs(s - 2 * d) > 0.01 * s)
        warn(warnings, where, pointer, "sparse_2to4 " + sparse->dump() + " is not twice dense " + dense->dump() + " for " + dtype);
    }
    // peak_compute.<dtype>.dense names the matrix-unit row when there is one.
    auto current = short_path_row.find(dtype);
    if (current == short_path_row.end() || (!current->second.first && is_matrix_unit(unit_kind)))
      short_path_row[dtype] = {is_matrix_unit(unit_kind), i};
  }
  for (const auto& [dtype, choice] : short_path_row) {
    const json& row = rows[choice.second];
    const std::string evidence = string_or_empty(row, "provenance").empty() ? record_evidence : row["provenance"].get<std::string>();
    for (const char* field : {"dense", "sparse_2to4"}) {
      auto it = row.find(field);
      if (it != row.end() && it->is_number())
        add_fact(facts, "peak_compute." + dtype + "." + field, *it, row.at("unit").get<std::string>(), evidence);
    }
  }
  for (const auto& [key, value] : facts_json.items()) {
    if (key == "peak_compute") continue;
    if (value.is_object() && key != "unavailable") flatten_group(facts, key, value, record_evidence);
    else if (value.is_object()) flatten_group(facts, key, value, record_evidence);
    else if (!value.is_null()) add_fact(facts, key, value, "", record_evidence);
  }
  const json& memory = facts_json.at("memory");
  auto number_at = [](const json& group, const char* key) -> std::optional<double> {
    auto it = group.find(key);
    if (it == group.end() || !it->is_number()) return std::nullopt;
    return it->get<double>();
  };
  // Absent is acceptable only when `unavailable` says so and what to do instead.
  auto declared_unavailable = [&](const std::string& path) {
    auto u = facts_json.find("unavailable");
    return u != facts_json.end() && u->is_object() && u->contains(path);
  };
  const auto bandwidth = number_at(memory, "bandwidth_tb_s");
  if (!bandwidth && !declared_unavailable("memory.bandwidth_tb_s"))
    warn(warnings, where, "/facts/memory/bandwidth_tb_s",
         "spec sheet has no memory bandwidth (and no `unavailable` entry saying why); every memory-bound utilization needs it");
  if (!number_at(memory, "capacity_gb") && !declared_unavailable("memory.capacity_gb"))
    warn(warnings, where, "/facts/memory/capacity_gb", "spec sheet has no memory capacity (and no `unavailable` entry saying why)");
  if (bandwidth && *bandwidth > 0) {
    for (const auto& [dtype, choice] : short_path_row) {
      if (dtype != "bf16" && dtype != "fp16") continue;
      const json& row = rows[choice.second];
      auto dense = row.find("dense");
      if (dense == row.end() || !dense->is_number()) continue;
      const double ridge = dense->get<double>() / *bandwidth;  // TFLOP/s / TB/s = FLOP/byte
      if (ridge < 1 || ridge > 2000)
        warn(warnings, where, "/facts/peak_compute/" + std::to_string(choice.second),
             "ridge point " + std::to_string(ridge) + " FLOP/byte for " + dtype + " is implausible; check units");
    }
  }
}

json applies_to_kernel(const json& scope, const json& generality, const std::string& level) {
  nlohmann::ordered_json out;
  for (const char* key : {"vendor", "arch", "product", "dsl", "operator_family"}) {
    auto it = scope.find(key);
    if (it != scope.end() && !it->is_null()) out[key] = *it;
  }
  if (auto it = scope.find("operators"); it != scope.end() && !it->empty()) out["operators"] = *it;
  if (auto it = scope.find("architectures"); it != scope.end() && !it->empty()) out["architectures"] = *it;
  if (auto it = generality.find("workload_family"); it != generality.end()) out["workload_family"] = *it;
  out["level"] = level;
  return out;
}

json applies_to_hardware(const json& identity) {
  nlohmann::ordered_json out;
  for (const char* key : {"vendor", "arch", "product", "compute_capability", "sm_arch", "gfx_arch", "target_id",
                          "isa", "mnemonic", "feature"}) {
    auto it = identity.find(key);
    if (it != identity.end() && !it->is_null()) out[key] = *it;
  }
  if (auto a = identity.find("availability"); a != identity.end()) out["availability"] = *a;
  return out;
}

std::string file_stem(const std::string& rel_path) {
  std::string name = rel_path.substr(rel_path.find_last_of('/') + 1);
  if (name.size() > 5 && name.ends_with(".json")) name.resize(name.size() - 5);
  return name;
}

void extract_hardware(const json& doc, const RecordLocation& where, BuiltRecord& out, std::vector<Diagnostic>& warnings) {
  Record& r = out.record;
  const json& identity = doc.at("identity");
  r.vendor = string_or_empty(identity, "vendor");
  r.arch = string_or_empty(identity, "arch");
  r.product = string_or_empty(identity, "product");
  r.status = string_or_empty(doc, "status");
  r.applies_to_json = applies_to_hardware(identity).dump();
  push_unique(r.products, r.product);
  if (auto a = identity.find("availability"); a != identity.end()) {
    if (auto p = a->find("products"); p != a->end())
      for (const auto& v : *p)
        if (v.is_string()) push_unique(r.products, v.get<std::string>());
  }
  if (auto a = identity.find("aliases"); a != identity.end())
    for (const auto& v : *a) push_unique(r.aliases, v.get<std::string>());
  for (const char* key : {"mnemonic", "feature", "sm_arch", "gfx_arch"}) push_unique(r.tags, string_or_empty(identity, key));

  const json& facts = doc.at("facts");
  const json& provenance = doc.at("provenance");
  const std::string evidence = string_or_empty(provenance, "evidence_class");
  r.confidence = evidence;
  for (const auto& source : provenance.at("sources")) {
    // A local note or measurement names itself; a published source must say where it is.
    const std::string kind = source.value("kind", "");
    if (kind == "internal-note" || kind == "measurement") continue;
    auto ref = source.find("ref");
    if (ref == source.end() || ref->is_null() || ref->get<std::string>().empty())
      warn(warnings, where, "/provenance/sources", "source \"" + source.value("title", "") + "\" has no URL or section reference");
  }
  r.title_text = string_or_empty(facts, "summary") + "\n" + string_or_empty(facts, "what") + "\n" + r.product + "\n" +
                 string_or_empty(identity, "mnemonic") + "\n" + string_or_empty(identity, "feature") + "\n";
  for (const auto& alias : r.aliases) r.title_text += alias + "\n";
  // kwiki's retrieval block: the situations that need this fact read like a title; its links
  // name the techniques that use it.
  if (auto retrieval = doc.find("retrieval"); retrieval != doc.end() && retrieval->is_object()) {
    if (auto t = retrieval->find("triggers"); t != retrieval->end())
      for (const auto& v : *t) r.title_text += v.get<std::string>() + "\n";
    if (auto l = retrieval->find("see_also"); l != retrieval->end())
      for (const auto& v : *l) push_unique(r.links, v.get<std::string>());
  }
  collect_text(facts, r.body_text);

  if (r.type == "spec-sheet") {
    flatten_spec_sheet(facts, evidence, where, out.facts, warnings);
  } else if (r.type == "measured-ceiling") {
    static const std::set<std::string> kKnownUnits = {"TB/s", "GB/s", "TFLOPS", "TOPS", "us", "ns", "ms", "MHz", "W"};
    const std::string unit = facts.at("unit").get<std::string>();
    if (!kKnownUnits.contains(unit)) warn(warnings, where, "/facts/unit", "unknown unit \"" + unit + "\"");
    add_fact(out.facts, facts.at("metric").get<std::string>(), facts.at("value"), unit, "measured");
  } else {
    for (const char* key : {"parameters", "shapes"}) {
      if (auto it = facts.find(key); it != facts.end() && it->is_object()) flatten_group(out.facts, key, *it, evidence);
    }
  }
  // Upstream convention: records/<type>/<vendor>/<arch>/<slug>.json for id <vendor>.<arch>.<type>.<slug>.
  const std::string expected_slug = r.id.substr(r.id.find(r.type + ".") + r.type.size() + 1);
  if (file_stem(where.rel_path) != expected_slug)
    warn(warnings, where, "/id", "file name does not match the id (expected " + expected_slug + ".json)");
}

void extract_kernel(const json& doc, const RecordLocation& where, BuiltRecord& out, std::vector<Diagnostic>& warnings) {
  Record& r = out.record;
  const json& retrieval = doc.at("retrieval");
  const json& scope = retrieval.at("scope");
  const json& generality = retrieval.at("generality");
  r.vendor = string_or_empty(scope, "vendor");
  r.arch = string_or_empty(scope, "arch");
  r.product = string_or_empty(scope, "product");
  r.dsl = string_or_empty(scope, "dsl");
  r.operator_family = string_or_empty(scope, "operator_family");
  r.level = string_or_empty(doc, "level");
  r.status = string_or_empty(doc, "status");
  r.workload_family = string_or_empty(generality, "workload_family");
  r.applies_to_json = applies_to_kernel(scope, generality, r.level).dump();
  push_unique(r.products, r.product == "any" ? "" : r.product);
  if (auto a = scope.find("architectures"); a != scope.end())
    for (const auto& v : *a) push_unique(r.products, v.get<std::string>());
  push_unique(r.operators, r.operator_family);
  if (auto ops = scope.find("operators"); ops != scope.end())
    for (const auto& v : *ops) push_unique(r.operators, v.get<std::string>());
  const json& signals = retrieval.at("signals");
  for (const auto& s : signals.at("symptoms")) push_unique(r.symptoms, s.get<std::string>());
  if (auto b = signals.find("bottleneck"); b != signals.end() && b->is_string()) push_unique(r.symptoms, b->get<std::string>());
  for (const auto& t : retrieval.at("technique_tags")) push_unique(r.tags, t.get<std::string>());
  if (auto links = retrieval.find("links"); links != retrieval.end() && links->is_object())
    for (const char* kind : {"see_also", "cited_records"})
      if (auto ids = links->find(kind); ids != links->end() && ids->is_array())
        for (const auto& v : *ids)
          if (v.is_string()) push_unique(r.links, v.get<std::string>());

  const json& payload = doc.at("payload");
  r.title_text = string_or_empty(payload, "goal") + "\n" + string_or_empty(payload, "technique") + "\n" +
                 string_or_empty(payload, "title") + "\n";
  if (auto p = payload.find("problem"); p != payload.end()) r.title_text += string_or_empty(*p, "statement") + "\n";
  for (const auto& t : retrieval.at("triggers")) r.title_text += t.get<std::string>() + "\n";
  // The body is everything else: what the title already holds is not tokenized twice.
  for (const auto& [key, value] : payload.items()) {
    if (key == "goal" || key == "technique" || key == "title") continue;
    if (key == "problem" && value.is_object()) {
      for (const auto& [pk, pv] : value.items())
        if (pk != "statement") collect_text(pv, r.body_text);
      continue;
    }
    collect_text(value, r.body_text);
  }

  const json& worth = doc.at("worth");
  r.worth = worth.at("rank").at("score").get<double>();
  r.tier = worth.at("rank").at("tier").get<std::string>();
  r.confidence = doc.at("evidence").at("summary").at("confidence").get<std::string>();

  if (r.type == "technique-card") {
    const std::string what = string_or_empty(payload, "what");
    const std::string when = string_or_empty(payload, "when");
    if (when.size() < 16 || what.find(when) != std::string::npos || when.find(what) != std::string::npos)
      warn(warnings, where, "/payload/when", "`when` does not say when the technique applies (it is empty, too short or repeats `what`)");
  }
  if (file_stem(where.rel_path) != r.id) warn(warnings, where, "/id", "file name does not match the id (expected " + r.id + ".json)");
}

}  // namespace

BuiltRecord build_record(const SchemaValidator& validator, const std::string& text, const RecordLocation& where,
                         std::vector<Diagnostic>& warnings) {
  if (trim_json_space(text).empty())
    throw Error(ErrorCode::kEmptyFile, "empty record file; delete it or write a record into it", where.display_path);
  if (auto bad = find_invalid_utf8(text))
    throw Error(ErrorCode::kInvalidUtf8, "text is not UTF-8 (invalid byte at " + describe_offset(text, *bad) + "); re-save the file as UTF-8",
                where.display_path);
  // JSON allows no raw NUL anywhere, and nlohmann would read a NUL as the end of the text
  // (accepting whatever follows it).
  if (const std::size_t nul = text.find('\0'); nul != std::string::npos)
    throw Error(ErrorCode::kInvalidJson, "malformed JSON at " + describe_offset(text, nul) + ": a NUL byte; remove it",
                where.display_path);
  json doc;
  try {
    doc = parse_json(text);
  } catch (const json::parse_error& e) {
    const std::string where_text = describe_offset(text, e.byte > 0 ? e.byte - 1 : 0);
    const bool truncated = e.byte >= text.size();
    throw Error(ErrorCode::kInvalidJson,
                std::string(truncated ? "truncated JSON" : "malformed JSON") + " at " + where_text + ": fix the syntax",
                where.display_path);
  } catch (const json::out_of_range& e) {
    // A number past the double range ("number overflow parsing '1e400'"): the record's fault.
    std::string detail = e.what();
    if (const std::size_t bracket = detail.find("] "); bracket != std::string::npos) detail.erase(0, bracket + 2);
    throw Error(ErrorCode::kInvalidJson, "malformed JSON: " + detail + "; write a number a double can hold",
                where.display_path);
  }
  if (!doc.is_object()) throw Error(ErrorCode::kSchemaViolation, "a record must be a JSON object", where.display_path, "/");
  const std::string schema_name = string_or_empty(doc, "schema");
  if (!validator.knows(schema_name))
    throw Error(ErrorCode::kUnknownSchema,
                schema_name.empty() ? "record has no \"schema\" field (expected hw-1.0 or clean-1.3)"
                                    : "unknown schema \"" + schema_name + "\" (expected hw-1.0 or clean-1.3)",
                where.display_path, "/schema");
  const bool hardware = schema_name == "hw-1.0";
  if ((where.source == "hardware_wiki") != hardware)
    throw Error(ErrorCode::kSchemaViolation,
                "a " + schema_name + " record does not belong under " + where.source + "/records",
                where.display_path, "/schema");
  if (auto violation = validator.validate(schema_name, doc))
    throw Error(ErrorCode::kSchemaViolation, violation->message, where.display_path, violation->pointer);

  BuiltRecord out;
  Record& r = out.record;
  r.id = doc.at("id").get<std::string>();
  r.store = where.internal ? kInternalStore : kPublicStore;
  r.key = where.internal ? std::string(kInternalPrefix) + r.id : r.id;
  r.source = where.source;
  r.schema = schema_name;
  r.type = doc.at("type").get<std::string>();
  r.path = where.rel_path;
  r.root = where.root;
  if (hardware) {
    // A hardware record has no engine-side fields: its payload is the whole record text.
    r.payload = std::string(trim_json_space(text));
    extract_hardware(doc, where, out, warnings);
  } else {
    r.payload = std::string(find_member_value(text, "payload"));
    extract_kernel(doc, where, out, warnings);
  }
  return out;
}

}  // namespace kwiki::detail
