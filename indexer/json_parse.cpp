// Parses record text into an nlohmann DOM with rapidjson's reader (nlohmann's lexer is the slow part).
#include "json_parse.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// rapidjson's SIMD scans of whitespace and string bodies (every x86-64 has SSE2).
#if defined(__SSE4_2__)
#define RAPIDJSON_SSE42
#elif defined(__SSE2__)
#define RAPIDJSON_SSE2
#endif
#include <rapidjson/reader.h>

#include "json_text.hpp"

namespace kwiki::detail {
namespace {

using nlohmann::json;

// rapidjson SAX events to an nlohmann DOM. A handler returning false stops the parse; the
// caller then lets nlohmann decide (and word the error).
class DomBuilder : public rapidjson::BaseReaderHandler<rapidjson::UTF8<>, DomBuilder> {
 public:
  explicit DomBuilder(bool check_escaped_utf8) : check_escaped_utf8_(check_escaped_utf8) {}

  json take_root() { return std::move(root_); }

  bool Null() { return place(json(nullptr)); }
  bool Bool(bool b) { return place(json(b)); }
  // kParseNumbersAsStringsFlag: every number arrives as its token, typed here as nlohmann types it.
  bool RawNumber(const char* token, rapidjson::SizeType length, bool) {
    const std::string_view view(token, length);
    const bool is_integer = view.find_first_of(".eE") == std::string_view::npos;
    char* end = nullptr;
    if (is_integer) {
      errno = 0;
      if (token[0] == '-') {
        const long long value = std::strtoll(token, &end, 10);
        if (errno == 0 && end == token + length) return place(json(static_cast<json::number_integer_t>(value)));
      } else {
        const unsigned long long value = std::strtoull(token, &end, 10);
        if (errno == 0 && end == token + length) return place(json(static_cast<json::number_unsigned_t>(value)));
      }
      // Out of the integer range: nlohmann reads it as a double, as below.
    }
    const double value = std::strtod(token, &end);
    if (end != token + length || !std::isfinite(value)) return false;  // nlohmann: "number overflow"
    return place(json(static_cast<json::number_float_t>(value)));
  }
  bool String(const char* text, rapidjson::SizeType length, bool) {
    if (!escaped_text_is_utf8(text, length)) return false;
    return place(json(std::string(text, length)));
  }
  bool Key(const char* text, rapidjson::SizeType length, bool) {
    if (!escaped_text_is_utf8(text, length)) return false;
    key_.assign(text, length);
    return true;
  }
  bool StartObject() { return open(json::value_t::object); }
  bool EndObject(rapidjson::SizeType) { return close(); }
  bool StartArray() { return open(json::value_t::array); }
  bool EndArray(rapidjson::SizeType) { return close(); }

 private:
  // rapidjson lets a lone \uDC00..\uDFFF escape through as CESU bytes; nlohmann refuses it.
  bool escaped_text_is_utf8(const char* text, std::size_t length) const {
    return !check_escaped_utf8_ || !find_invalid_utf8(std::string_view(text, length));
  }

  json* place_value(json&& value) {
    if (open_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    json& parent = *open_.back();
    if (parent.is_array()) {
      auto& array = parent.get_ref<json::array_t&>();
      array.push_back(std::move(value));
      return &array.back();
    }
    // Like nlohmann's DOM parser, a repeated key keeps the last value.
    auto& object = parent.get_ref<json::object_t&>();
    auto [it, inserted] = object.try_emplace(std::move(key_));
    it->second = std::move(value);
    return &it->second;
  }
  bool place(json&& value) {
    place_value(std::move(value));
    return true;
  }
  bool open(json::value_t type) {
    open_.push_back(place_value(json(type)));
    return true;
  }
  bool close() {
    open_.pop_back();
    return true;
  }

  const bool check_escaped_utf8_;
  json root_;
  std::vector<json*> open_;  // containers being filled, innermost last
  std::string key_;
};

}  // namespace

json parse_json(const std::string& text) {
  // rapidjson reads up to the terminating NUL: text with a NUL inside is nlohmann's to refuse.
  if (std::memchr(text.data(), '\0', text.size()) == nullptr) {
    // Only an escape can make rapidjson's output differ from valid UTF-8 input.
    const bool has_unicode_escape = text.find("\\u") != std::string::npos;
    DomBuilder builder(has_unicode_escape);
    rapidjson::Reader reader;
    rapidjson::StringStream stream(text.c_str());
    constexpr unsigned kFlags = rapidjson::kParseIterativeFlag | rapidjson::kParseNumbersAsStringsFlag;
    if (reader.Parse<kFlags>(stream, builder)) return builder.take_root();
  }
  // Malformed (or an edge rapidjson reads differently): nlohmann decides, with its own error.
  return json::parse(text);
}

}  // namespace kwiki::detail
