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
const std::set<std::string> kKeepMinimal = {"goal", "technique", "title", "id", "type", "metric", "value", "unit"};
constexpr std::size_t kLongField = 320;
constexpr std::size_t kMinimalString = 160;

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
    // At the minimum a record with no goal or title keeps its summary (hardware facts).
    const bool summary_is_title = key == "summary" && !object.contains("goal") && !object.contains("title");
    if (code || (!keep.contains(key) && !summary_is_title && (level == BriefLevel::kMinimal || size > kLongField)))
      drop.push_back(key);
  }
  for (const auto& key : drop) {
    omitted[prefix + key] = dump_size(object[key]);
    object.erase(key);
  }
  if (level != BriefLevel::kMinimal) return;
  // At the minimum, what is left is cut to a sentence's length.
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (!it->is_string() || it->get_ref<const std::string&>().size() <= kMinimalString) continue;
    std::string& text = it->get_ref<std::string&>();
    omitted[prefix + it.key() + " (truncated)"] = text.size();
    std::size_t cut = kMinimalString;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // stay on a UTF-8 boundary
    text.resize(cut);
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
  if (level == BriefLevel::kBare) {
    const ordered_json* facts = doc.contains("facts") && doc["facts"].is_object() ? &doc["facts"] : nullptr;
    std::string key, line;
    for (const char* candidate : {"goal", "title", "technique", "summary"}) {
      const ordered_json* holder = doc.contains(candidate) ? &doc : (facts && facts->contains(candidate) ? facts : nullptr);
      if (holder && (*holder)[candidate].is_string()) {
        key = candidate;
        line = (*holder)[candidate].get<std::string>();
        break;
      }
    }
    if (line.size() > 48) {
      std::size_t cut = 48;
      while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
      line.resize(cut);
    }
    ordered_json bare;
    if (!key.empty()) bare[key] = line;
    bare["omitted_by_brief"] = {{"*", payload.size()}};
    return bare.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  // {"field": bytes of the full value}; "field (truncated)" when a shortened value remains.
  ordered_json omitted = doc.contains("omitted_by_brief") ? doc["omitted_by_brief"] : ordered_json::object();
  const std::size_t before = omitted.size();
  brief_object(doc, "", level, omitted);
  if (omitted.size() == before) return {};
  doc["omitted_by_brief"] = omitted;
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string fit_answer(Answer& answer, std::size_t max_bytes) {
  std::string json = render_with_notes(answer);
  if (max_bytes == 0 || json.size() <= max_bytes) return json;
  std::vector<AnswerRecord> dropped;  // in rank order
  std::size_t note_index = std::string::npos;
  std::size_t named = std::string::npos;  // how many dropped ids the note names
  auto write_drop_note = [&] {
    if (dropped.empty()) return;
    if (note_index == std::string::npos) {
      note_index = answer.notes.size();
      answer.notes.emplace_back();
    }
    const std::size_t shown = std::min(named, dropped.size());
    std::string note = "dropped " + std::to_string(dropped.size()) + " lower-ranked record(s) for --max-bytes";
    if (shown > 0) note += ", in rank order:";
    for (std::size_t i = 0; i < shown; ++i) note += " " + dropped[i].record.key;
    if (shown < dropped.size() && shown > 0) note += " (+" + std::to_string(dropped.size() - shown) + " more)";
    answer.notes[note_index] = note;
  };
  auto drop_last = [&] {
    dropped.insert(dropped.begin(), std::move(answer.records.back()));
    answer.records.pop_back();
    write_drop_note();
    json = render_with_notes(answer);
  };
  auto reduce = [&](AnswerRecord& a, BriefLevel level) {
    const std::string base = a.payload_override.empty() || level == BriefLevel::kBare ? a.record.payload : a.payload_override;
    std::string briefed = brief_payload(base, a.record.source, level);
    if (briefed.empty()) return false;
    a.payload_override = std::move(briefed);
    if (level == BriefLevel::kBare) a.compact = true;
    return true;
  };
  // 1. Lowest-ranked records go first.
  while (json.size() > max_bytes && answer.records.size() > 1) drop_last();
  // 2. Then the payload left is briefed, reduced, then bared with a compact envelope.
  for (BriefLevel level : {BriefLevel::kBrief, BriefLevel::kMinimal, BriefLevel::kBare}) {
    if (json.size() <= max_bytes || answer.records.empty()) break;
    if (!reduce(answer.records.front(), level)) continue;
    answer.notes.push_back(std::string(level == BriefLevel::kBrief ? "briefed" : "reduced") + " for --max-bytes: " +
                           answer.records.front().record.key + " (kwiki get returns it whole)");
    json = render_with_notes(answer);
  }
  // 3. Then the list of dropped ids shrinks to a count, and other notes are shortened, then removed.
  while (json.size() > max_bytes && !dropped.empty() && named > 0) {
    named = std::min(named, dropped.size()) - 1;
    write_drop_note();
    json = render_with_notes(answer);
  }
  for (std::size_t i = 0; json.size() > max_bytes && i < answer.notes.size(); ++i) {
    if (i == note_index || answer.notes[i].size() <= 48) continue;
    answer.notes[i].resize(45);
    answer.notes[i] += "...";
    json = render_with_notes(answer);
  }
  for (std::size_t i = answer.notes.size(); json.size() > max_bytes && i-- > 0;) {
    if (i == note_index) continue;
    answer.notes.erase(answer.notes.begin() + static_cast<std::ptrdiff_t>(i));
    if (note_index != std::string::npos && note_index > i) --note_index;
    json = render_with_notes(answer);
  }
  // 4. A record that fits beats none: when even the top record's bare form is too big, the
  // best-ranked record whose bare form fits takes its place, and the note says so.
  if (json.size() > max_bytes && !answer.records.empty()) {
    drop_last();
    for (std::size_t i = 1; i < dropped.size(); ++i) {
      AnswerRecord candidate = dropped[i];
      reduce(candidate, BriefLevel::kBare);
      answer.records = {candidate};
      std::vector<AnswerRecord> rest = dropped;
      rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(i));
      std::swap(rest, dropped);
      write_drop_note();
      json = render_with_notes(answer);
      if (json.size() <= max_bytes) break;
      std::swap(rest, dropped);
      answer.records.clear();
      write_drop_note();
      json = render_with_notes(answer);
    }
  }
  // 5. Finally the remaining note.
  while (json.size() > max_bytes && !answer.notes.empty()) {
    answer.notes.pop_back();
    json = render_with_notes(answer);
  }
  return json;
}

}  // namespace kwiki::detail
