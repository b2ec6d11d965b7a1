// The brief form of a record: its title, one or two lines of what to do, its citation.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kwiki/record.hpp"

namespace kwiki::detail {

/// The longest title and action line a brief record carries, in bytes (cut at a sentence or a
/// word, marked "..."). Eight records with their ids, labels and citations fit in about 4 KB.
inline constexpr std::size_t kBriefTitleBytes = 110;
inline constexpr std::size_t kBriefActionBytes = 170;
/// A citation longer than this (a deep URL) is left out of the brief form; `kwiki get` has it.
inline constexpr std::size_t kBriefCiteBytes = 110;

/// What the brief form says of a record, read from its payload through the table of its type.
struct BriefLines {
  std::string title;   ///< what the record is for (goal, title, summary, semantics)
  std::string action;  ///< what to do (technique, rule, lesson, syntax), or ""
  std::string cite;    ///< its first source's URL or reference, or ""
  /// Payload members the brief lines did not show, in payload order, as dot paths (facts.caveats
  /// for hardware records): what a byte budget's leftover room serves whole.
  std::vector<std::string> detail_fields;
};

/// The brief lines of a record. A payload that does not parse gives empty lines (never throws).
BriefLines brief_lines(const Record& record);

/// The payload member at a dot path (as BriefLines::detail_fields names it), or null.
nlohmann::ordered_json payload_member(const nlohmann::ordered_json& payload, std::string_view dot_path);

/// `text` cut to at most `max_bytes`: whole sentences when the first fits, else whole words and
/// "...", never inside a UTF-8 sequence. Whitespace runs become single spaces.
std::string cut_text(std::string_view text, std::size_t max_bytes);

}  // namespace kwiki::detail
