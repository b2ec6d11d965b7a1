// Byte-level JSON helpers: UTF-8 validation, member spans, error locations.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kwiki::detail {

/// Byte offset of the first invalid UTF-8 sequence, or nullopt when `text` is valid UTF-8.
std::optional<std::size_t> find_invalid_utf8(std::string_view text) noexcept;

/// "line L, column C" for a byte offset into `text`.
std::string describe_offset(std::string_view text, std::size_t offset);

/// The exact bytes of the value of top-level member `name` in a JSON object text that is
/// already known to be valid. Empty view when absent.
std::string_view find_member_value(std::string_view object_text, std::string_view name);

/// `text` without leading and trailing JSON whitespace.
std::string_view trim_json_space(std::string_view text) noexcept;

/// JSON pointer ("/a/0/b") from valijson's context path (["<root>", "[a]", "[0]", "[b]"]).
std::string pointer_from_context(const std::vector<std::string>& context);

/// Escapes one JSON pointer token (~ and /).
std::string escape_pointer_token(std::string_view token);

}  // namespace kwiki::detail
