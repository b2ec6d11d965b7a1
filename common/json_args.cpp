// Untrusted JSON in: a nesting limit before parsing, and typed readers of request members.
#include "json_args.hpp"

#include <cmath>

#include "kwiki/error.hpp"

namespace kwiki::detail {
namespace {

using nlohmann::json;

// The member, or nullptr when it is absent or null.
const json* member(const json& request, const char* key) {
  if (!request.is_object()) return nullptr;
  const auto it = request.find(key);
  return it == request.end() || it->is_null() ? nullptr : &*it;
}

[[noreturn]] void wrong(const char* key, const std::string& expected) {
  throw Error(ErrorCode::kUsage, std::string("\"") + key + "\" must be " + expected, "", std::string("/") + key);
}

}  // namespace

std::size_t json_nesting_depth(std::string_view text, std::size_t limit) {
  std::size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

json parse_untrusted_json(std::string_view text, const std::string& what) {
  if (json_nesting_depth(text) > kMaxJsonDepth)
    throw Error(ErrorCode::kBadInput, what + " nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded()) throw Error(ErrorCode::kInvalidJson, what + " is not valid JSON");
  return doc;
}

std::string arg_string(const json& request, const char* key, const std::string& fallback) {
  const json* v = member(request, key);
  if (!v) return fallback;
  if (!v->is_string()) wrong(key, "a string");
  return v->get<std::string>();
}

bool arg_bool(const json& request, const char* key, bool fallback) {
  const json* v = member(request, key);
  if (!v) return fallback;
  if (!v->is_boolean()) wrong(key, "true or false");
  return v->get<bool>();
}

long long arg_integer(const json& request, const char* key, long long fallback, long long min, long long max) {
  const json* v = member(request, key);
  if (!v) return fallback;
  const std::string range = "an integer from " + std::to_string(min) + " to " + std::to_string(max);
  if (v->is_number_unsigned()) {
    const auto u = v->get<unsigned long long>();
    if (u > static_cast<unsigned long long>(max)) wrong(key, range);
    return static_cast<long long>(u);
  }
  if (!v->is_number_integer()) wrong(key, range);
  const long long n = v->get<long long>();
  if (n < min || n > max) wrong(key, range);
  return n;
}

double arg_number(const json& request, const char* key, double fallback, double min, double max) {
  const json* v = member(request, key);
  if (!v) return fallback;
  if (!v->is_number()) wrong(key, "a number");
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < min || d > max) wrong(key, "a finite number from " + std::to_string(min) + " to " + std::to_string(max));
  return d;
}

std::vector<std::string> arg_strings(const json& request, const char* key) {
  std::vector<std::string> out;
  const json* v = member(request, key);
  if (!v) return out;
  if (!v->is_array()) wrong(key, "an array of strings");
  for (const auto& item : *v) {
    if (!item.is_string()) wrong(key, "an array of strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

}  // namespace kwiki::detail
