// Small text helpers shared by the indexer and the query engine.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kwiki::detail {

/// The current UTC time as "YYYY-MM-DDTHH:MM:SSZ".
std::string now_iso8601();

/// A product alias as stored and looked up: lowercase alphanumerics, other runs as one '-'.
std::string normalize_alias(const std::string& s);

/// Typing distance between two byte strings: insertions, deletions, substitutions and swaps of
/// two adjacent bytes ("rmsnrom" -> "rmsnorm") count one each (optimal string alignment).
std::size_t edit_distance(std::string_view a, std::string_view b);

/// Appends value unless it is empty or already listed (lists here hold a handful of labels).
inline void push_unique(std::vector<std::string>& list, const std::string& value) {
  if (!value.empty() && std::find(list.begin(), list.end(), value) == list.end()) list.push_back(value);
}

}  // namespace kwiki::detail
