// Untrusted JSON in: a nesting limit before parsing, and typed readers of request members.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kwiki::detail {

/// Deepest nesting kwiki accepts in a message, a request or a --set value.
inline constexpr std::size_t kMaxJsonDepth = 64;

/// Depth of the deepest [ / { nesting in a JSON text (strings skipped); counting stops at
/// `limit` + 1, so a hostile text costs one linear scan and no recursion.
std::size_t json_nesting_depth(std::string_view text, std::size_t limit = kMaxJsonDepth);

/// Parses untrusted JSON: nested deeper than kMaxJsonDepth is kwiki::Error kBadInput, malformed
/// is kInvalidJson; `what` names the text in the message ("the request", "--set value").
nlohmann::json parse_untrusted_json(std::string_view text, const std::string& what);

/// Typed readers of one member of a request object, for the C API and MCP. An absent (or null)
/// member gives the fallback; a member of another type, or out of range, throws kwiki::Error
/// kUsage with the member's JSON pointer.
std::string arg_string(const nlohmann::json& request, const char* key, const std::string& fallback = {});
bool arg_bool(const nlohmann::json& request, const char* key, bool fallback);
/// An integer in [min, max].
long long arg_integer(const nlohmann::json& request, const char* key, long long fallback, long long min, long long max);
/// A finite number in [min, max].
double arg_number(const nlohmann::json& request, const char* key, double fallback, double min, double max);
/// An array of strings (absent: empty).
std::vector<std::string> arg_strings(const nlohmann::json& request, const char* key);

}  // namespace kwiki::detail
