// Renders answers in the contract's JSON shape (full or brief), and as text for terminals.
#include "kwiki/answer.hpp"

#include <nlohmann/json.hpp>

#include "answer_render.hpp"
#include "brief.hpp"

namespace kwiki {
namespace {

using ordered_json = nlohmann::ordered_json;

std::string dump(const ordered_json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

// The full form: the record's labels, then its stored payload bytes spliced in verbatim, appended
// to `out` (payloads are kilobytes: no temporary copies of them).
void append_full_record(std::string& out, const AnswerRecord& a) {
  const Record& r = a.record;
  ordered_json head;
  head["wiki_id"] = r.id;
  head["store"] = r.store;
  head["source"] = r.source;
  head["type"] = r.type;
  head["applies_to"] = nullptr;  // applies_to is stored as JSON text; spliced below
  head["match"] = {{"arch", a.match_arch}, {"why", a.why}};
  if (!r.confidence.empty()) head["confidence"] = r.confidence;
  if (!r.tier.empty()) head["tier"] = r.tier;
  if (!a.explain_json.empty()) head["explain"] = ordered_json::parse(a.explain_json);
  const std::string text = dump(head);
  const std::string_view placeholder = "\"applies_to\":null";
  const std::size_t at = text.find(placeholder);
  out.append(text, 0, at);
  out += "\"applies_to\":";
  out += r.applies_to_json;
  out.append(text, at + placeholder.size(), text.size() - at - placeholder.size() - 1);  // reopen the object for the payload
  out += ",\"payload\":";
  out += r.payload;
  out += '}';
}



// Why a record matched, in a line: the reasons the match label does not already say, at most
// three, "text match" only when nothing else matched.
std::string brief_why(const AnswerRecord& a) {
  std::string out;
  int kept = 0;
  for (const auto& w : a.why) {
    if (kept == 3) break;
    if (w == "text match" && a.why.size() > 1) continue;
    if (a.match_arch == "exact" && w.starts_with("architecture ")) continue;
    out += (out.empty() ? "" : "; ") + w;
    ++kept;
  }
  if (out.empty() && !a.why.empty()) out = a.why.front();
  return out;
}

// The brief form: labels, title, what to do, why, citation, and any detail fields served whole.
std::string render_brief_record(const AnswerRecord& a) {
  const detail::BriefLines lines = detail::brief_lines(a.record);
  ordered_json j;
  j["type"] = a.record.type;
  j["match"] = a.match_arch;
  if (!lines.title.empty()) j["title"] = lines.title;
  if (!lines.action.empty()) j["do"] = lines.action;
  if (const std::string why = brief_why(a); !why.empty()) j["why"] = why;
  if (!lines.cite.empty()) j["cite"] = lines.cite;
  if (!a.detail_fields.empty()) {
    const ordered_json payload = ordered_json::parse(a.record.payload, nullptr, false);
    ordered_json fields = ordered_json::object();
    for (const auto& f : a.detail_fields) fields[f] = detail::payload_member(payload, f);
    j["fields"] = std::move(fields);
  }
  if (!a.explain_json.empty()) j["explain"] = ordered_json::parse(a.explain_json);
  return dump(j);
}

void append_record_entry(std::string& out, const AnswerRecord& record, AnswerForm form) {
  out += dump(record.record.key);
  out += ':';
  if (form == AnswerForm::kFull) append_full_record(out, record);
  else out += render_brief_record(record);
}

std::string join_notes(const Answer& answer) {
  ordered_json notes = ordered_json::array();
  for (const auto& n : answer.notes) notes.push_back(n);
  for (const auto& n : answer.search_notes) notes.push_back(n);
  return dump(notes);
}

}  // namespace

namespace detail {

std::string render_fact_json(const FactAnswer& f, AnswerForm form, bool sources) {
  const bool full = form == AnswerForm::kFull;
  ordered_json j;
  j["product"] = f.product;
  j["field"] = f.field;
  j["value"] = f.value;
  j["unit"] = f.unit.empty() ? ordered_json() : ordered_json(f.unit);
  ordered_json provenance;
  if (full) provenance["record"] = f.record;
  // A computed value cites its derivation; a recorded or aliased one its own field.
  provenance["citation"] = f.record + ":" + (f.derivation.empty() || f.value.is_null() ? f.field : f.derivation);
  provenance["evidence_class"] = f.evidence;
  if (full || sources) provenance["sources"] = f.sources;
  // The one explanation a fact may carry; in the brief form cut so the fact fits its maximum.
  std::string key, text;
  if (!f.alias.empty()) key = "alias", text = f.alias;
  else if (!f.derivation.empty()) key = f.value.is_null() ? "unavailable" : "derivation", text = f.derivation;
  if (!key.empty()) {
    provenance[key] = text;
    j["provenance"] = provenance;
    std::string out = dump(j);
    // Escapes make the text longer in JSON than in memory: cut until the whole fits.
    for (std::size_t room = text.size(); !full && !sources && out.size() > kMaxBriefFactBytes && room > 16;) {
      const std::size_t excess = out.size() - kMaxBriefFactBytes;
      room = room > excess + 16 ? room - excess : 16;
      j["provenance"][key] = cut_text(text, room);
      out = dump(j);
    }
    return out;
  }
  j["provenance"] = std::move(provenance);
  return dump(j);
}

std::string render_record_entry(const AnswerRecord& record, AnswerForm form) {
  std::string out;
  append_record_entry(out, record, form);
  return out;
}

}  // namespace detail

std::string json_text(const ordered_json& value) { return dump(value); }

std::string render_answer_json(const Answer& answer) {
  std::string out;
  std::size_t payloads = 0;
  if (answer.form == AnswerForm::kFull)
    for (const auto& a : answer.records) payloads += a.record.payload.size() + a.record.applies_to_json.size() + 256;
  out.reserve(payloads + 1024);
  out += '{';
  if (!answer.query_id.empty()) out += "\"query_id\":" + dump(answer.query_id) + ",";
  if (answer.form == AnswerForm::kBrief) out += "\"form\":\"brief\",";
  if (!answer.facts.empty()) {
    out += "\"hardware\":[";
    for (std::size_t i = 0; i < answer.facts.size(); ++i) {
      if (i) out += ',';
      out += detail::render_fact_json(answer.facts[i], answer.form, answer.fact_sources);
    }
    out += "],";
  }
  if (!answer.comparison.is_null()) out += "\"comparison\":" + dump(answer.comparison) + ",";
  out += "\"records\":{";
  for (std::size_t i = 0; i < answer.records.size(); ++i) {
    if (i) out += ',';
    append_record_entry(out, answer.records[i], answer.form);
  }
  out += "},\"notes\":" + join_notes(answer);
  if (answer.form == AnswerForm::kBrief && !answer.records.empty()) out += ",\"get\":" + dump(detail::kGetHint);
  if (!answer.explain_json.empty()) out += ",\"explain\":" + answer.explain_json;
  out += '}';
  return out;
}

std::string render_answer_text(const Answer& answer) {
  std::string out;
  if (!answer.query_id.empty()) out += "query " + answer.query_id + "\n";
  if (!answer.facts.empty()) out += "hardware:\n";
  for (const auto& f : answer.facts) {
    out += "  " + f.product + " " + f.field + " = " + (f.value.is_null() ? std::string("not recorded") : dump(f.value));
    if (!f.unit.empty() && !f.value.is_null()) out += " " + f.unit;
    out += "  [" + f.record + ":" + (f.derivation.empty() || f.value.is_null() ? f.field : f.derivation) + ", " + f.evidence + "]\n";
    if (!f.alias.empty()) out += "    alias: " + f.alias + "\n";
    else if (!f.derivation.empty()) out += std::string("    ") + (f.value.is_null() ? "unavailable: " : "derived: ") + f.derivation + "\n";
  }
  int rank = 1;
  for (const auto& a : answer.records) {
    const Record& r = a.record;
    out += std::to_string(rank++) + ". " + r.key + "  [" + r.type + ", " + r.vendor + "/" + r.arch;
    if (!r.dsl.empty()) out += "/" + r.dsl;
    out += ", " + a.match_arch + "]\n";
    const detail::BriefLines lines = detail::brief_lines(r);
    if (!lines.title.empty()) out += "   " + lines.title + "\n";
    if (!lines.action.empty()) out += "   do: " + lines.action + "\n";
    if (!a.why.empty()) {
      out += "   why:";
      for (const auto& w : a.why) out += " " + w + ";";
      out += "\n";
    }
    if (!lines.cite.empty()) out += "   cite: " + lines.cite + "\n";
  }
  for (const auto& n : answer.notes) out += "note: " + n + "\n";
  for (const auto& n : answer.search_notes) out += "note: " + n + "\n";
  if (!answer.records.empty()) out += "(" + std::string(detail::kGetHint) + ")\n";
  return out;
}

}  // namespace kwiki
