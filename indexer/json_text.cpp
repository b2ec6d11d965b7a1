// Byte-level JSON helpers: UTF-8 validation, member spans, error locations.
#include "json_text.hpp"

#include <cstdint>
#include <cstring>

namespace kwiki::detail {

std::optional<std::size_t> find_invalid_utf8(std::string_view text) noexcept {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    // Records are mostly ASCII: step over eight ASCII bytes at a time.
    while (i + 8 <= n) {
      std::uint64_t word;
      std::memcpy(&word, s + i, sizeof word);
      if (word & 0x8080808080808080ULL) break;
      i += 8;
    }
    if (i >= n) break;
    const unsigned char c = s[i];
    if (c < 0x80) { ++i; continue; }
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
    else return i;
    if (i + len > n) return i;
    for (std::size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    // Reject overlong forms, surrogates and code points past U+10FFFF.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
      return i;
    i += len;
  }
  return std::nullopt;
}

std::string describe_offset(std::string_view text, std::size_t offset) {
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') { ++line; col = 1; } else { ++col; }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Index just past the JSON string starting at text[i] == '"'.
std::size_t skip_string(std::string_view text, std::size_t i) {
  ++i;
  while (i < text.size()) {
    // memchr finds the next quote fast; it closes the string unless an odd run of backslashes escapes it.
    const void* quote = std::memchr(text.data() + i, '"', text.size() - i);
    if (quote == nullptr) return text.size();
    const std::size_t q = static_cast<std::size_t>(static_cast<const char*>(quote) - text.data());
    std::size_t backslashes = 0;
    while (q - backslashes > i && text[q - backslashes - 1] == '\\') ++backslashes;
    if (backslashes % 2 == 0) return q + 1;
    i = q + 1;
  }
  return text.size();
}

// Index just past the JSON value starting at text[i] (valid JSON assumed).
std::size_t skip_value(std::string_view text, std::size_t i) {
  if (text[i] == '"') return skip_string(text, i);
  if (text[i] == '{' || text[i] == '[') {
    int depth = 0;
    while (i < text.size()) {
      const char c = text[i];
      if (c == '"') { i = skip_string(text, i); continue; }
      if (c == '{' || c == '[') ++depth;
      if (c == '}' || c == ']') {
        if (--depth == 0) return i + 1;
      }
      ++i;
    }
    return text.size();
  }
  while (i < text.size() && text[i] != ',' && text[i] != '}' && text[i] != ']' && !is_space(text[i])) ++i;
  return i;
}

std::size_t skip_space(std::string_view text, std::size_t i) {
  while (i < text.size() && is_space(text[i])) ++i;
  return i;
}

}  // namespace

std::string_view find_member_value(std::string_view text, std::string_view name) {
  std::size_t i = skip_space(text, 0);
  if (i >= text.size() || text[i] != '{') return {};
  i = skip_space(text, i + 1);
  while (i < text.size() && text[i] == '"') {
    const std::size_t key_end = skip_string(text, i);
    const std::string_view key = text.substr(i + 1, key_end - i - 2);
    i = skip_space(text, key_end);
    if (i >= text.size() || text[i] != ':') return {};
    i = skip_space(text, i + 1);
    const std::size_t value_end = skip_value(text, i);
    // Member names in records carry no escapes, so a raw comparison is exact.
    if (key == name) return text.substr(i, value_end - i);
    i = skip_space(text, value_end);
    if (i < text.size() && text[i] == ',') i = skip_space(text, i + 1);
  }
  return {};
}

std::string_view trim_json_space(std::string_view text) noexcept {
  std::size_t b = 0, e = text.size();
  while (b < e && is_space(text[b])) ++b;
  while (e > b && is_space(text[e - 1])) --e;
  return text.substr(b, e - b);
}

std::string escape_pointer_token(std::string_view token) {
  std::string out;
  for (char c : token) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

std::string pointer_from_context(const std::vector<std::string>& context) {
  std::string pointer;
  for (const auto& part : context) {
    if (part == "<root>") continue;
    std::string_view token = part;
    if (token.size() >= 2 && token.front() == '[' && token.back() == ']') token = token.substr(1, token.size() - 2);
    if (token.size() >= 2 && token.front() == '"' && token.back() == '"') token = token.substr(1, token.size() - 2);
    pointer += "/" + escape_pointer_token(token);
  }
  return pointer.empty() ? "/" : pointer;
}

}  // namespace kwiki::detail
