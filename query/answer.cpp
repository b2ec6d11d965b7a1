// Renders answers in the contract's JSON shape, splicing stored payload bytes verbatim.
#include "kwiki/answer.hpp"

#include <nlohmann/json.hpp>

namespace kwiki {
namespace {

using ordered_json = nlohmann::ordered_json;

std::string dump(const ordered_json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

std::string render_record(const AnswerRecord& a) {
  const Record& r = a.record;
  ordered_json head;
  head["wiki_id"] = r.id;
  head["store"] = r.store;
  head["source"] = r.source;
  head["type"] = r.type;
  // applies_to is stored as JSON text; it is spliced, and parsed only to compact it.
  head["applies_to"] = nullptr;
  ordered_json match;
  match["arch"] = a.match_arch;
  match["why"] = a.compact ? std::vector<std::string>{} : a.why;
  head["match"] = std::move(match);
  if (!r.confidence.empty() && !a.compact) head["confidence"] = r.confidence;
  if (!r.tier.empty() && !a.compact) head["tier"] = r.tier;
  if (!a.explain_json.empty()) head["explain"] = ordered_json::parse(a.explain_json);
  std::string applies_to = r.applies_to_json;
  if (a.compact) {
    const ordered_json full = ordered_json::parse(r.applies_to_json);
    ordered_json small;
    for (const char* key : {"vendor", "arch"})
      if (full.contains(key)) small[key] = full[key];
    applies_to = dump(small);
  }
  std::string text = dump(head);
  const std::string placeholder = "\"applies_to\":null";
  text.replace(text.find(placeholder), placeholder.size(), "\"applies_to\":" + applies_to);
  text.pop_back();  // reopen the object to append the payload bytes
  text += ",\"payload\":";
  text += a.payload_override.empty() ? r.payload : a.payload_override;
  text += '}';
  return text;
}

}  // namespace

std::string json_text(const ordered_json& value) { return dump(value); }

std::string render_answer_json(const Answer& answer) {
  std::string out = "{";
  if (!answer.query_id.empty()) out += "\"query_id\":" + dump(answer.query_id) + ",";
  out += "\"records\":{";
  bool first = true;
  for (const auto& a : answer.records) {
    if (!first) out += ',';
    first = false;
    out += dump(a.record.key);
    out += ':';
    out += render_record(a);
  }
  out += "},\"notes\":" + dump(ordered_json(answer.notes));
  if (!answer.explain_json.empty()) out += ",\"explain\":" + answer.explain_json;
  out += '}';
  return out;
}

std::string render_answer_text(const Answer& answer) {
  std::string out;
  if (!answer.query_id.empty()) out += "query " + answer.query_id + "\n";
  int rank = 1;
  for (const auto& a : answer.records) {
    const Record& r = a.record;
    out += std::to_string(rank++) + ". " + r.key + "  [" + r.type + ", " + r.vendor + "/" + r.arch;
    if (!r.dsl.empty()) out += "/" + r.dsl;
    out += ", " + a.match_arch + "]\n";
    std::string goal;
    try {
      auto payload = nlohmann::json::parse(a.payload_override.empty() ? r.payload : a.payload_override);
      if (payload.contains("goal") && payload["goal"].is_string()) goal = payload["goal"].get<std::string>();
      else if (payload.contains("facts") && payload["facts"].contains("summary")) goal = payload["facts"]["summary"].get<std::string>();
    } catch (const std::exception&) {
    }
    if (!goal.empty()) out += "   " + goal + "\n";
    if (!a.why.empty()) {
      out += "   why:";
      for (const auto& w : a.why) out += " " + w + ";";
      out += "\n";
    }
  }
  for (const auto& n : answer.notes) out += "note: " + n + "\n";
  return out;
}

}  // namespace kwiki
