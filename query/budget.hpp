// Byte budgets: --brief payloads and the --max-bytes hard limit on a whole answer.
#pragma once

#include <string>

#include "kwiki/answer.hpp"

namespace kwiki::detail {

/// How hard to brief: kBrief elides long fields; kMinimal keeps only what says what a record is;
/// kBare keeps one line (goal, title or summary, cut to 48 bytes) and the size of the whole under "*".
enum class BriefLevel { kBrief, kMinimal, kBare };

/// Returns the briefed payload text (fields replaced and listed under "omitted_by_brief" with
/// their sizes), or "" when nothing needed eliding.
std::string brief_payload(const std::string& payload, const std::string& source, BriefLevel level);

/// Drops lowest-ranked records, then briefs, then minimizes, until the rendered answer fits
/// `max_bytes`; says what it did in notes. Returns the rendered JSON (which always fits when
/// max_bytes >= kMinAnswerBytes).
std::string fit_answer(Answer& answer, std::size_t max_bytes);

/// The smallest --max-bytes kwiki accepts: room for the query id, notes and one error note.
inline constexpr std::size_t kMinAnswerBytes = 256;

}  // namespace kwiki::detail
