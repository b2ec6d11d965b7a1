// parse_json builds exactly the DOM nlohmann::json::parse builds, and fails exactly as it does.
#include "json_parse.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace kwiki::detail {
namespace {

using nlohmann::json;

// Same value and same stored types (unsigned vs signed vs double), recursively.
::testing::AssertionResult same_dom(const json& got, const json& want, const std::string& where = "") {
  if (got.type() != want.type())
    return ::testing::AssertionFailure() << where << ": type " << got.type_name() << " != " << want.type_name()
                                         << " (" << got.dump() << " vs " << want.dump() << ")";
  if (got.is_object()) {
    if (got.size() != want.size()) return ::testing::AssertionFailure() << where << ": object sizes differ";
    for (auto g = got.begin(), w = want.begin(); g != got.end(); ++g, ++w) {
      if (g.key() != w.key()) return ::testing::AssertionFailure() << where << ": key " << g.key() << " != " << w.key();
      if (auto r = same_dom(*g, *w, where + "/" + g.key()); !r) return r;
    }
    return ::testing::AssertionSuccess();
  }
  if (got.is_array()) {
    if (got.size() != want.size()) return ::testing::AssertionFailure() << where << ": array sizes differ";
    for (std::size_t i = 0; i < got.size(); ++i)
      if (auto r = same_dom(got[i], want[i], where + "/" + std::to_string(i)); !r) return r;
    return ::testing::AssertionSuccess();
  }
  if (got.is_number_float()) {
    const double g = got.get<double>(), w = want.get<double>();
    if (std::memcmp(&g, &w, sizeof g) != 0) return ::testing::AssertionFailure() << where << ": " << got.dump() << " != " << want.dump();
    return ::testing::AssertionSuccess();
  }
  if (got != want) return ::testing::AssertionFailure() << where << ": " << got.dump() << " != " << want.dump();
  return ::testing::AssertionSuccess();
}

void expect_same_as_nlohmann(const std::string& text) {
  SCOPED_TRACE(text);
  EXPECT_TRUE(same_dom(parse_json(text), json::parse(text)));
}

void expect_same_error_as_nlohmann(const std::string& text) {
  SCOPED_TRACE(text);
  std::string want;
  try {
    [[maybe_unused]] const json accepted = json::parse(text);
    FAIL() << "nlohmann accepts it";
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number overflow
    want = e.what();
  }
  try {
    [[maybe_unused]] const json accepted = parse_json(text);
    FAIL() << "parse_json accepts it";
  } catch (const json::exception& e) {
    EXPECT_EQ(e.what(), want);
  }
}

TEST(ParseJson, NumbersKeepNlohmannTypes) {
  for (const char* number : {"0", "-0", "1", "-1", "4294967295", "4294967296", "-2147483648", "-2147483649",
                             "9223372036854775807", "9223372036854775808", "18446744073709551615",
                             "18446744073709551616", "-9223372036854775808", "-9223372036854775809",
                             "123456789012345678901234567890", "1.5", "-0.0", "0.1", "1e5", "1E-5", "2.5e+3",
                             "2.2250738585072014e-308", "4.9e-324", "1e-400", "1.7976931348623157e308",
                             "0.30000000000000004", "3.141592653589793238462643383279"})
    expect_same_as_nlohmann(std::string("{\"n\": ") + number + ", \"a\": [" + number + "]}");
}

TEST(ParseJson, StringsEscapesAndStructure) {
  expect_same_as_nlohmann(R"({"s": "caf\u00e9 \ud83d\ude80 \n\t\\\"\/", "e": "", "u": "\u0000x"})");
  expect_same_as_nlohmann("{\"raw\": \"\xC3\xA9t\xC3\xA9 \xE2\x82\xAC\"}");
  expect_same_as_nlohmann(R"({"o": {}, "a": [], "n": null, "t": true, "f": false, "deep": [[[{"x": [1, {"y": []}]}]]]})");
  expect_same_as_nlohmann("  [1, \"two\", 3.0]\n\n");
  expect_same_as_nlohmann("\"top-level string\"");
  expect_same_as_nlohmann("\xEF\xBB\xBF{\"bom\": 1}");  // a UTF-8 BOM, which nlohmann skips
}

TEST(ParseJson, RepeatedKeyKeepsTheLastValue) {
  expect_same_as_nlohmann(R"({"a": 1, "b": 2, "a": {"x": 3}})");
  EXPECT_EQ(parse_json(R"({"a": 1, "a": 2})").at("a"), 2);
}

TEST(ParseJson, MalformedTextFailsWithNlohmannsError) {
  for (const char* text : {"{", "{\"a\": }", "[1, 2,]", "{\"a\" 1}", "{\"a\": 1} x", "{\"a\": 01}", "{'a': 1}",
                           "[\"\\ud800\"]", "[\"\\udc00\"]", "[\"\\ud800\\u0041\"]", "[\"bad \\q escape\"]",
                           "[1e400]", "[-1e400]", "[NaN]", "[\"tab\tinside\"]", "[1.]", "[.5]", "[1e]", "nul",
                           "{\"a\": 1 /* comment */}", "", "   "})
    expect_same_error_as_nlohmann(text);
}

TEST(ParseJson, TextWithANulInsideEndsAsNlohmannEndsIt) {
  expect_same_as_nlohmann(std::string("{\"a\": 1}\0{\"b\": 2}", 17));  // nlohmann stops at the NUL
  expect_same_error_as_nlohmann(std::string("[\"a\0b\"]", 7));
  expect_same_error_as_nlohmann(std::string("{\"a\": \0}", 8));
}

TEST(ParseJson, BundledRecordsParseAsNlohmannParsesThem) {
  std::size_t checked = 0;
  for (const char* source : {"hardware_wiki", "kernel_wiki"}) {
    const std::filesystem::path records = std::filesystem::path(KWIKI_SOURCE_DIR) / "gpu-wiki" / source / "records";
    if (!std::filesystem::is_directory(records)) continue;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(records)) {
      if (!entry.is_regular_file() || entry.path().extension() != ".json") continue;
      std::ifstream in(entry.path(), std::ios::binary);
      std::stringstream text;
      text << in.rdbuf();
      SCOPED_TRACE(entry.path().string());
      EXPECT_TRUE(same_dom(parse_json(text.str()), json::parse(text.str())));
      ++checked;
    }
  }
  EXPECT_GT(checked, 100u);
}

}  // namespace
}  // namespace kwiki::detail
