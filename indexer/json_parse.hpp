// Parses record text into an nlohmann DOM with rapidjson's reader (nlohmann's lexer is the slow part).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kwiki::detail {

/// Parses `text` (valid UTF-8) into the DOM nlohmann::json::parse would build: same value
/// types (non-negative integers unsigned, negative integers signed, others double), last
/// duplicate key wins. rapidjson tokenizes; whatever it refuses is parsed again by
/// nlohmann::json::parse, so malformed text throws nlohmann's parse_error, exactly as before.
/// Thread-safe (no shared state).
nlohmann::json parse_json(const std::string& text);

}  // namespace kwiki::detail
