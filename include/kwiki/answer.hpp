// The answer contract: records keyed by id in rank order, with notes, rendered as JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kwiki/record.hpp"

namespace kwiki {

/// One record in an answer.
struct AnswerRecord {
  Record record;
  std::string match_arch = "exact";  ///< exact | architecture-neutral | other-architecture | fallback
  std::vector<std::string> why;      ///< why it matched
  /// Replacement payload text (briefed); when empty the stored payload is served verbatim.
  std::string payload_override;
  std::string explain_json;          ///< score parts for --explain, or empty
  bool compact = false;              ///< envelope cut to vendor/arch and an empty why (tight --max-bytes)
};

/// A whole answer.
struct Answer {
  std::string query_id;              ///< empty for `get`
  std::vector<AnswerRecord> records; ///< rank order
  std::vector<std::string> notes;
  std::string explain_json;          ///< top-level explain object, or empty
};

/// Renders the answer as one JSON object (no trailing newline). Payloads are embedded as their
/// stored bytes, so a served payload is byte-identical to the record file's text.
std::string render_answer_json(const Answer& answer);

/// Compact JSON text of a value; invalid UTF-8 (from user input) becomes U+FFFD, never an error.
std::string json_text(const nlohmann::ordered_json& value);

/// Renders a short human-readable view for terminals.
std::string render_answer_text(const Answer& answer);

}  // namespace kwiki
