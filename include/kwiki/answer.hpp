// The answer contract: hardware facts and records keyed by id in rank order, with notes, as JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kwiki/record.hpp"

namespace kwiki {

/// How an answer renders its records and facts.
enum class AnswerForm {
  kFull,   ///< every record whole (payload byte-identical to the stored one); facts with sources
  kBrief,  ///< per record its brief lines (title, what to do, why, citation); facts without sources
};

/// One hardware fact as answered: exact value with its provenance.
struct FactAnswer {
  std::string product;
  std::string record;    ///< spec sheet id
  std::string field;     ///< dot path
  nlohmann::ordered_json value;
  std::string unit;
  std::string evidence;  ///< evidence class
  nlohmann::ordered_json sources;  ///< the record's sources
  std::string derivation;          ///< how a computed field (ridge point) was computed, or why a null one is unavailable
  std::string alias;               ///< a field asked in the other vendor's word: which field answered and why
};

/// One record in an answer.
struct AnswerRecord {
  Record record;
  std::string match_arch = "exact";  ///< exact | architecture-neutral | other-architecture | fallback
  std::vector<std::string> why;      ///< why it matched
  std::string explain_json;          ///< score parts for --explain, or empty
  /// Brief form only: payload fields served whole beside the brief lines (a byte budget's room
  /// left after every record), in the record's own field order.
  std::vector<std::string> detail_fields;
};

/// A whole answer.
struct Answer {
  std::string query_id;               ///< empty for `get` and `hw`
  AnswerForm form = AnswerForm::kFull;
  bool fact_sources = true;           ///< facts carry their sources (always in the full form)
  std::vector<FactAnswer> facts;      ///< "hardware": exact facts, never ranked
  nlohmann::ordered_json comparison;  ///< "comparison" (kwiki hw --vs), or null
  std::vector<AnswerRecord> records;  ///< rank order
  std::vector<std::string> notes;     ///< what the answer means: coverage, not recorded, spelling, budget
  std::vector<std::string> search_notes;  ///< how the search went: scope, widening (after notes)
  std::string explain_json;           ///< top-level explain object, or empty
};

/// Renders the answer as one JSON object (no trailing newline): query_id, form, hardware,
/// comparison, records, notes, get (brief form: where the whole records are), explain. In the
/// full form payloads are embedded as their stored bytes, so a served payload is byte-identical
/// to the record file's text. Deterministic; never throws for a record whose payload parses.
std::string render_answer_json(const Answer& answer);

/// Compact JSON text of a value; invalid UTF-8 (from user input) becomes U+FFFD, never an error.
std::string json_text(const nlohmann::ordered_json& value);

/// Renders a short human-readable view for terminals: the facts with their values and
/// citations, then per record its rank, id, labels, title, what to do, why and citation.
std::string render_answer_text(const Answer& answer);

}  // namespace kwiki
