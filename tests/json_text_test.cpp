// Tests of the byte-level JSON helpers: UTF-8 checks, member spans, pointers.
#include "json_text.hpp"

#include <gtest/gtest.h>

namespace kwiki::detail {
namespace {

TEST(Utf8, AcceptsAsciiAndMultibyte) {
  EXPECT_FALSE(find_invalid_utf8("plain ascii").has_value());
  EXPECT_FALSE(find_invalid_utf8("\xC3\xA9t\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x9A\x80").has_value());
}

TEST(Utf8, RejectsLoneContinuationAndTruncation) {
  EXPECT_EQ(find_invalid_utf8("ab\x80"), 2u);
  EXPECT_EQ(find_invalid_utf8("ab\xE2\x82"), 2u);
  EXPECT_EQ(find_invalid_utf8("\xFF"), 0u);
}

TEST(Utf8, RejectsOverlongAndSurrogates) {
  EXPECT_EQ(find_invalid_utf8("\xC0\xAF"), 0u);          // overlong '/'
  EXPECT_EQ(find_invalid_utf8("x\xED\xA0\x80"), 1u);     // U+D800
  EXPECT_EQ(find_invalid_utf8("\xF4\x90\x80\x80"), 0u);  // past U+10FFFF
}

TEST(Utf8, FindsTheBadByteAfterLongAsciiRuns) {
  const std::string ascii(37, 'a');
  EXPECT_FALSE(find_invalid_utf8(ascii).has_value());
  EXPECT_EQ(find_invalid_utf8(ascii + "\x80" + ascii), 37u);
  EXPECT_EQ(find_invalid_utf8(ascii + "\xC3\xA9" + ascii + "\xE2\x82"), 37u + 2u + 37u);
  EXPECT_FALSE(find_invalid_utf8(ascii + "\xE2\x82\xAC" + ascii).has_value());
}

TEST(DescribeOffset, CountsLinesAndColumns) {
  EXPECT_EQ(describe_offset("ab\ncd\nef", 7), "line 3, column 2");
  EXPECT_EQ(describe_offset("abc", 0), "line 1, column 1");
}

TEST(MemberValue, FindsNestedObjectVerbatim) {
  const std::string text = "{\n \"a\": 1,\n \"payload\": {\"x\": \"}\\\"{\", \"y\": [1, {\"z\": 2}]},\n \"b\": 2\n}";
  EXPECT_EQ(find_member_value(text, "payload"), "{\"x\": \"}\\\"{\", \"y\": [1, {\"z\": 2}]}");
  EXPECT_EQ(find_member_value(text, "b"), "2");
  EXPECT_EQ(find_member_value(text, "missing"), "");
}

TEST(MemberValue, SkipsStringsEndingInEscapedBackslashesAndQuotes) {
  const std::string text = R"({"a": "x\\", "b": "q\"\\\"}", "c": ["\\\\", "\""], "payload": {"p": "\\"}, "d": 1})";
  EXPECT_EQ(find_member_value(text, "a"), R"("x\\")");
  EXPECT_EQ(find_member_value(text, "b"), R"("q\"\\\"}")");
  EXPECT_EQ(find_member_value(text, "payload"), R"({"p": "\\"})");
  EXPECT_EQ(find_member_value(text, "d"), "1");
}

TEST(MemberValue, IgnoresNestedKeysOfTheSameName) {
  const std::string text = R"({"outer": {"payload": 1}, "payload": "top"})";
  EXPECT_EQ(find_member_value(text, "payload"), "\"top\"");
}

TEST(TrimJsonSpace, StripsBothEnds) {
  EXPECT_EQ(trim_json_space(" \n{}\r\n "), "{}");
  EXPECT_EQ(trim_json_space("  \n"), "");
}

TEST(Pointer, FromValijsonContext) {
  EXPECT_EQ(pointer_from_context({"<root>", "[retrieval]", "[scope]", "[vendor]"}), "/retrieval/scope/vendor");
  EXPECT_EQ(pointer_from_context({"<root>"}), "/");
  EXPECT_EQ(pointer_from_context({"<root>", "[a/b]", "[0]"}), "/a~1b/0");
}

}  // namespace
}  // namespace kwiki::detail
