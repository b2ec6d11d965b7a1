// Byte budgets: content in rank order (facts, brief records, detail fields), then the envelope.
#include "budget.hpp"

#include <algorithm>

#include "answer_render.hpp"
#include "brief.hpp"

namespace kwiki::detail {
namespace {

using ordered_json = nlohmann::ordered_json;

std::size_t quoted_size(const std::string& text) { return json_text(ordered_json(text)).size(); }

// What a verdict note keeps when cut: its first clause ("not covered: nothing here is about ...").
constexpr std::size_t kEssentialNoteBytes = 96;

// Bytes of an answer assembled piece by piece, so a candidate piece is weighed without
// rendering the whole answer again (rendering a brief record parses its payload).
struct Ledger {
  std::size_t skeleton = 0;  ///< the answer with no facts, records or notes
  std::size_t facts = 0, fact_count = 0;
  std::size_t records = 0, record_count = 0;
  std::size_t hint = 0;      ///< ,"get":"..." while there are records
  std::size_t notes = 0, note_count = 0;

  std::size_t content() const {
    return (fact_count ? facts + fact_count - 1 + 14 : 0) + records + (record_count ? record_count - 1 + hint : 0);
  }
  std::size_t total() const { return skeleton + content() + notes + (note_count ? note_count - 1 : 0); }
  std::size_t with_fact(std::size_t piece) const { return piece + (fact_count ? 1 : 14); }
  std::size_t with_record(std::size_t piece) const { return piece + (record_count ? 1 : hint); }
  std::size_t with_note(std::size_t piece) const { return piece + (note_count ? 1 : 0); }
};

// "dropped 12 record(s) for --max-bytes: a b (+10 more)", naming as many ids (in rank order) as
// `room` allows; the count alone when none fits.
std::string drop_note(const std::vector<std::string>& ids, std::size_t room) {
  const std::string head = "dropped " + std::to_string(ids.size()) + " record(s) for --max-bytes";
  std::string named = head;
  for (std::size_t shown = 1; shown <= ids.size(); ++shown) {
    std::string next = head + ":";
    for (std::size_t i = 0; i < shown; ++i) next += " " + ids[i];
    if (shown < ids.size()) next += " (+" + std::to_string(ids.size() - shown) + " more)";
    if (quoted_size(next) > room) break;
    named = std::move(next);
  }
  return named;
}

}  // namespace

std::string fill_budget(Answer& answer, std::size_t max_bytes, bool detail) {
  answer.form = AnswerForm::kBrief;
  std::vector<FactAnswer> facts = std::move(answer.facts);
  std::vector<AnswerRecord> records = std::move(answer.records);
  std::vector<std::string> notes = std::move(answer.notes), search_notes = std::move(answer.search_notes);
  answer.facts.clear();
  answer.records.clear();
  answer.notes.clear();
  answer.search_notes.clear();
  bool explained = !answer.explain_json.empty();
  answer.explain_json.clear();
  for (auto& r : records) {
    explained = explained || !r.explain_json.empty();
    r.explain_json.clear();
    r.detail_fields.clear();
  }

  Ledger ledger;
  ledger.skeleton = render_answer_json(answer).size();
  ledger.hint = std::string(",\"get\":").size() + quoted_size(kGetHint);
  // The envelope's share: a tenth, or what its fixed members need beside the essentials (the
  // count of dropped records, a not-covered verdict's first clause) when a tenth is too little.
  std::size_t essentials = ledger.skeleton + ledger.hint + quoted_size(drop_note(std::vector<std::string>(records.size()), 0)) + 1;
  for (const auto& n : notes)
    if (n.starts_with("not covered")) essentials += std::min<std::size_t>(quoted_size(n), kEssentialNoteBytes) + 1;
  const std::size_t envelope_cap = std::max(max_bytes / 10, essentials);
  const std::size_t content_room = max_bytes > envelope_cap ? max_bytes - envelope_cap : 0;
  auto fits = [&](std::size_t extra) { return ledger.skeleton + ledger.content() + extra <= ledger.skeleton + content_room; };

  // 1. Facts, each in the brief form (at most kMaxBriefFactBytes).
  std::size_t facts_dropped = 0;
  for (auto& f : facts) {
    const std::size_t piece = render_fact_json(f, answer.form, answer.fact_sources).size();
    if (!fits(ledger.with_fact(piece))) {
      ++facts_dropped;
      continue;
    }
    ledger.facts += piece;
    ++ledger.fact_count;
    answer.facts.push_back(std::move(f));
  }

  // 2. Records in the brief form, in rank order, once every fact is in; a smaller one further
  // down may use what a larger one left.
  std::vector<std::size_t> sizes;
  std::vector<std::string> dropped;
  for (auto& r : records) {
    const std::size_t piece = facts_dropped > 0 ? 0 : render_record_entry(r, answer.form).size();
    if (facts_dropped > 0 || !fits(ledger.with_record(piece))) {
      dropped.push_back(r.record.key);
      continue;
    }
    ledger.records += piece;
    ++ledger.record_count;
    sizes.push_back(piece);
    answer.records.push_back(std::move(r));
  }

  // 3. The top records' other payload fields, whole, in rank and field order.
  bool detail_left = false;
  if (detail) {
    for (std::size_t i = 0; i < answer.records.size(); ++i) {
      AnswerRecord& r = answer.records[i];
      for (const auto& field : brief_lines(r.record).detail_fields) {
        r.detail_fields.push_back(field);
        const std::size_t piece = render_record_entry(r, answer.form).size();
        if (piece > sizes[i] && !fits(piece - sizes[i])) {
          r.detail_fields.pop_back();
          detail_left = true;
          continue;
        }
        ledger.records += piece - sizes[i];
        sizes[i] = piece;
      }
    }
  }
  const bool content_cut = facts_dropped > 0 || !dropped.empty() || detail_left;

  // 4. The envelope: what the answer means, then what was dropped, then how the search went.
  // While content was cut it keeps to its tenth; else it may use what content left.
  std::size_t left = max_bytes > ledger.total() ? max_bytes - ledger.total() : 0;
  if (content_cut) {
    const std::size_t envelope = ledger.total() - ledger.content() + (ledger.record_count ? ledger.hint : 0);
    left = std::min(left, envelope_cap > envelope ? envelope_cap - envelope : 0);
  }
  auto add_note = [&](std::vector<std::string>& into, const std::string& note, bool cut_to_fit) {
    const std::size_t piece = quoted_size(note);
    if (ledger.with_note(piece) <= left) {
      into.push_back(note);
    } else if (cut_to_fit && left > ledger.with_note(48)) {
      std::string cut = cut_text(note, left - ledger.with_note(8));
      while (!cut.empty() && ledger.with_note(quoted_size(cut)) > left) cut = cut_text(cut, cut.size() - 8);
      if (cut.size() < 24) return false;
      into.push_back(std::move(cut));
    } else {
      return false;
    }
    const std::size_t used = ledger.with_note(quoted_size(into.back()));
    left -= used;
    ledger.notes += quoted_size(into.back());
    ++ledger.note_count;
    return true;
  };
  std::string facts_note;
  if (facts_dropped > 0) facts_note = "dropped " + std::to_string(facts_dropped) + " hardware fact(s) for --max-bytes: kwiki hw gives each";
  // The counts first, so they are never crowded out; the ids named once the rest is placed.
  std::vector<std::string> drops;
  const std::string count_only = dropped.empty() ? std::string() : drop_note(dropped, 0);
  if (!dropped.empty()) add_note(drops, count_only, true);
  for (const auto& n : notes) add_note(answer.notes, n, true);
  if (!facts_note.empty()) add_note(drops, facts_note, true);
  if (explained) add_note(drops, "explain left out for --max-bytes", false);
  if (!dropped.empty() && !drops.empty() && drops.front() == count_only) {
    const std::size_t old_piece = quoted_size(count_only);
    const std::string named = drop_note(dropped, left + old_piece);
    left += old_piece;
    left -= quoted_size(named);
    ledger.notes += quoted_size(named) - old_piece;
    drops.front() = named;
  }
  answer.notes.insert(answer.notes.end(), drops.begin(), drops.end());
  for (const auto& n : search_notes) add_note(answer.search_notes, n, false);

  std::string json = render_answer_json(answer);
  // The ledger is exact; this is the guarantee should a renderer change under it.
  while (json.size() > max_bytes && (!answer.search_notes.empty() || !answer.notes.empty() || !answer.records.empty())) {
    if (!answer.search_notes.empty()) answer.search_notes.pop_back();
    else if (!answer.notes.empty()) answer.notes.pop_back();
    else answer.records.pop_back();
    json = render_answer_json(answer);
  }
  return json;
}

}  // namespace kwiki::detail
