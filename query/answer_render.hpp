// The pieces of an answer's JSON (one fact, one record), for the renderer and the byte budget.
#pragma once

#include <cstddef>
#include <string>

#include "kwiki/answer.hpp"

namespace kwiki::detail {

/// The most one fact takes in the brief form, in bytes (a long alias, derivation or reason for
/// its absence is cut to fit).
inline constexpr std::size_t kMaxBriefFactBytes = 300;

/// What a brief answer says once, under "get": where the whole records are.
inline constexpr const char* kGetHint = "kwiki get ID: whole record";

/// One fact as JSON: product, field, value, unit and provenance (citation record:field,
/// evidence class, an alias, derivation or reason it is unavailable; the sheet id and the
/// sources in the full form or when `sources`).
std::string render_fact_json(const FactAnswer& fact, AnswerForm form, bool sources);

/// One record's "key":{...} member of "records" in the given form.
std::string render_record_entry(const AnswerRecord& record, AnswerForm form);

}  // namespace kwiki::detail
