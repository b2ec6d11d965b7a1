// Tests of kwiki::Error: stable codes, exit statuses and JSON rendering.
#include "kwiki/error.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace kwiki {
namespace {

TEST(ErrorCodes, ExitStatusFollowsCategory) {
  EXPECT_EQ(exit_code_for(ErrorCode::kUsage), 2);
  EXPECT_EQ(exit_code_for(ErrorCode::kSchemaViolation), 2);
  EXPECT_EQ(exit_code_for(ErrorCode::kSymlinkLoop), 2);
  EXPECT_EQ(exit_code_for(ErrorCode::kNotRecorded), 3);
  EXPECT_EQ(exit_code_for(ErrorCode::kIndexMissing), 4);
  EXPECT_EQ(exit_code_for(ErrorCode::kInternal), 4);
}

TEST(ErrorCodes, NumbersAreStable) {
  EXPECT_EQ(static_cast<int>(ErrorCode::kInvalidJson), 201);
  EXPECT_EQ(static_cast<int>(ErrorCode::kDuplicateId), 203);
  EXPECT_EQ(static_cast<int>(ErrorCode::kIndexCorrupt), 401);
  EXPECT_STREQ(error_code_name(ErrorCode::kInvalidUtf8), "invalid_utf8");
}

TEST(ErrorRender, JsonCarriesFileAndPointer) {
  const Error e(ErrorCode::kSchemaViolation, "bad \"enum\"", "a/b.json", "/retrieval/scope/vendor");
  const auto j = nlohmann::json::parse(e.to_json());
  EXPECT_EQ(j["error"]["code"], "schema_violation");
  EXPECT_EQ(j["error"]["number"], 202);
  EXPECT_EQ(j["error"]["file"], "a/b.json");
  EXPECT_EQ(j["error"]["pointer"], "/retrieval/scope/vendor");
  EXPECT_EQ(e.one_line(), "a/b.json: /retrieval/scope/vendor: bad \"enum\"");
}

TEST(ErrorRender, InvalidUtf8InMessageStillRendersJson) {
  const Error e(ErrorCode::kBadInput, std::string("bad byte \xFF here"));
  EXPECT_NO_THROW(nlohmann::json::parse(e.to_json()));
}

}  // namespace
}  // namespace kwiki
