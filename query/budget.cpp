// Byte budgets: --brief payloads and the --max-bytes hard limit on a whole answer.
#include "budget.hpp"

#include <nlohmann/json.hpp>
#include <set>

namespace kwiki::detail {
namespace {

using ordered_json = nlohmann::ordered_json;

// Fields an agent needs to decide whether a record applies; never elided by --brief.
const std::set<std::string> kKeepBrief = {
    "goal", "problem", "technique", "what", "when", "why", "expected_effect", "how_to_verify", "title", "summary",
    "caveats", "lesson", "verdict", "attempted", "candidate_techniques", "likely_causes", "key_facts",
    "schema", "id", "type", "status", "identity", "peak_compute", "memory", "compute_units", "provenance", "sources",
    "syntax", "semantics", "why_it_matters", "metric", "value", "unit", "statistic", "date", "device", "method"};
const std::set<std::string> kKeepMinimal = {"goal", "technique", "what", "when", "title", "summary", "schema", "id",
                                            "type", "identity", "peak_compute", "memory", "compute_units", "metric",
                                            "value", "unit", "syntax", "semantics"};
constexpr std::size_t kLongField = 320;

std::size_t dump_size(const ordered_json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size(); }

void brief_object(ordered_json& object, const std::string& prefix, BriefLevel level, ordered_json& omitted) {
  const auto& keep = level == BriefLevel::kMinimal ? kKeepMinimal : kKeepBrief;
  std::vector<std::string> drop;
  for (auto it = object.begin(); it != object.end(); ++it) {
    const std::string& key = it.key();
    if (key == "omitted_by_brief") continue;
    if (key == "facts" && it->is_object()) {
      brief_object(*it, prefix + "facts.", level, omitted);
      continue;
    }
    const std::size_t size = dump_size(*it);
    const bool code = key == "implementation" || key == "snippet" || key == "dispatch_snippet";
    if (code || (!keep.contains(key) && (level == BriefLevel::kMinimal || size > kLongField))) drop.push_back(key);
  }
  for (const auto& key : drop) {
    omitted.push_back({{"field", prefix + key}, {"bytes", dump_size(object[key])}});
    object.erase(key);
  }
}

std::string render_with_notes(const Answer& answer) { return render_answer_json(answer); }

}  // namespace

std::string brief_payload(const std::string& payload, const std::string& source, BriefLevel level) {
  ordered_json doc;
  try {
    doc = ordered_json::parse(payload);
  } catch (const std::exception&) {
    return {};
  }
  if (!doc.is_object()) return {};
  ordered_json omitted = doc.contains("omitted_by_brief") ? doc["omitted_by_brief"] : ordered_json::array();
  const std::size_t before = omitted.size();
  brief_object(doc, "", level, omitted);
  if (omitted.size() == before) return {};
  doc["omitted_by_brief"] = omitted;
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string fit_answer(Answer& answer, std::size_t max_bytes) {
  std::string json = render_with_notes(answer);
  if (max_bytes == 0 || json.size() <= max_bytes) return json;
  std::vector<std::string> dropped;
  std::size_t note_index = std::string::npos;
  auto drop_last = [&] {
    dropped.push_back(answer.records.back().record.key);
    answer.records.pop_back();
    if (note_index == std::string::npos) {
      note_index = answer.notes.size();
      answer.notes.emplace_back();
    }
    std::string note = "dropped for the byte budget (lowest rank first):";
    for (const auto& id : dropped) note += " " + id;
    answer.notes[note_index] = note;
    json = render_with_notes(answer);
  };
  // 1. Lowest-ranked records go first.
  while (json.size() > max_bytes && answer.records.size() > 1) drop_last();
  // 2. Then the payload left is briefed, then reduced to its minimum.
  for (BriefLevel level : {BriefLevel::kBrief, BriefLevel::kMinimal}) {
    if (json.size() <= max_bytes || answer.records.empty()) break;
    auto& a = answer.records.front();
    const std::string base = a.payload_override.empty() ? a.record.payload : a.payload_override;
    std::string briefed = brief_payload(base, a.record.source, level);
    if (briefed.empty()) continue;
    a.payload_override = std::move(briefed);
    answer.notes.push_back(std::string(level == BriefLevel::kBrief ? "briefed" : "reduced to its minimum") +
                           " for the byte budget: " + a.record.key + " (kwiki get returns it whole)");
    json = render_with_notes(answer);
  }
  // 3. Then the last record itself.
  if (json.size() > max_bytes && !answer.records.empty()) drop_last();
  // 4. Notes are shortened last.
  while (json.size() > max_bytes && !answer.notes.empty()) {
    auto longest = std::max_element(answer.notes.begin(), answer.notes.end(),
                                    [](const std::string& a, const std::string& b) { return a.size() < b.size(); });
    if (longest->size() <= 48) {
      answer.notes.pop_back();
    } else {
      const std::size_t excess = json.size() - max_bytes + 3;
      longest->resize(longest->size() - std::min(longest->size() - 45, excess));
      *longest += "...";
    }
    json = render_with_notes(answer);
  }
  return json;
}

}  // namespace kwiki::detail
