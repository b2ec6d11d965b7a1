// Byte budgets: the --max-bytes hard limit on a whole answer, spent on content in rank order.
#pragma once

#include <cstddef>
#include <string>

#include "kwiki/answer.hpp"

namespace kwiki::detail {

/// The smallest --max-bytes kwiki accepts: room for the query id, one record's id and a note.
inline constexpr std::size_t kMinAnswerBytes = 256;

/// Fits `answer` into `max_bytes` (>= kMinAnswerBytes) and returns its JSON, which always fits.
/// The answer takes the brief form and the bytes go to content in rank order: every fact that
/// fits (each at most kMaxBriefFactBytes without sources), then, when all of them fit, records
/// in the brief form, then, with
/// `detail`, the top records' other payload fields whole, in rank and field order. What content
/// leaves is the envelope's: the query id and labels, the notes (what the answer means first,
/// then the ids dropped, then how the search went), cut to fit. While content was dropped the
/// envelope takes at most a tenth of `max_bytes` beside a not-covered verdict (part of the
/// answer: room for its first clause is kept), or, when a tenth is too little, its fixed
/// members and the count of dropped records.
/// Explain output does not fit a budget and is left out (a note says so). Deterministic.
std::string fill_budget(Answer& answer, std::size_t max_bytes, bool detail);

}  // namespace kwiki::detail
