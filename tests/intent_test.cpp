// Unit tests of intent extraction: the architecture scope when a request names several; free words.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "kwiki/intent.hpp"

namespace kwiki {
namespace {

using Arches = std::vector<std::string>;

TEST(IntentArch, OneArchitectureHasNoSecond) {
  const Intent i = extract_intent("rmsnorm on the MI300X");
  EXPECT_EQ(i.vendor, "amd");
  EXPECT_EQ(i.arch, "cdna3");
  EXPECT_TRUE(i.also_arches.empty());
  EXPECT_FALSE(i.to_json().contains("also_architectures"));
}

TEST(IntentArch, TwoAmdTargetsAreBothExact) {
  const Intent i = extract_intent("int8 mfma shapes on gfx942 vs gfx950");
  EXPECT_EQ(i.vendor, "amd");
  EXPECT_EQ(i.arch, "cdna3");
  EXPECT_EQ(i.also_arches, Arches{"cdna4"});
  EXPECT_EQ(i.exact_arches(), (Arches{"cdna3", "cdna4"}));
  EXPECT_EQ(i.target, "gfx942");  // the first target named
  EXPECT_EQ(i.to_json()["also_architectures"], nlohmann::ordered_json::array({"cdna4"}));
}

TEST(IntentArch, PortBetweenAmdProducts) {
  const Intent i = extract_intent("porting my MI300X kernel to MI355X");
  EXPECT_EQ(i.products, (Arches{"mi300x", "mi355x"}));
  EXPECT_EQ(i.vendor, "amd");
  EXPECT_EQ(i.exact_arches(), (Arches{"cdna3", "cdna4"}));
}

TEST(IntentArch, TwoNvidiaProductsTargetsAndFamilies) {
  EXPECT_EQ(extract_intent("H100 vs B200 gemm").exact_arches(), (Arches{"hopper", "blackwell"}));
  EXPECT_EQ(extract_intent("sm_100a vs sm_90a tile shapes").exact_arches(), (Arches{"blackwell", "hopper"}));
  EXPECT_EQ(extract_intent("what changed from hopper to blackwell for gemm").exact_arches(), (Arches{"hopper", "blackwell"}));
  EXPECT_EQ(extract_intent("cdna3 vs cdna4 lds size").exact_arches(), (Arches{"cdna3", "cdna4"}));
}

TEST(IntentArch, SameArchitectureTwiceIsOne) {
  const Intent i = extract_intent("MI300X vs MI325X on gfx942");
  EXPECT_EQ(i.arch, "cdna3");
  EXPECT_TRUE(i.also_arches.empty());
}

TEST(IntentArch, ProductsOfTwoVendorsScopeTheirArchitectures) {
  const Intent i = extract_intent("moved my gemm from H100 to MI300X");
  EXPECT_TRUE(i.vendor.empty());
  EXPECT_EQ(i.arch, "hopper");
  EXPECT_EQ(i.also_arches, std::vector<std::string>{"cdna3"});
  ASSERT_FALSE(i.notes.empty());
  EXPECT_NE(i.notes.front().find("two vendors"), std::string::npos);
}

TEST(IntentArch, ArchitectureOfAnotherVendorNeverJoinsTheScope) {
  const Intent i = extract_intent("sm_90a vs gfx942 reduction");
  EXPECT_EQ(i.vendor, "nvidia");
  EXPECT_EQ(i.arch, "hopper");
  EXPECT_TRUE(i.also_arches.empty());
}

TEST(IntentArch, UnrecordedSecondArchitectureLeavesTheScopeWithANote) {
  const Intent i = extract_intent("MI250X vs MI300X softmax");
  EXPECT_EQ(i.vendor, "amd");
  EXPECT_EQ(i.arch, "cdna3");
  EXPECT_TRUE(i.also_arches.empty());
  EXPECT_EQ(i.unresolved_arch, "cdna2");
  ASSERT_FALSE(i.notes.empty());
  EXPECT_NE(i.notes.back().find("cdna2 has no records in kwiki; kept the amd boundary"), std::string::npos);
}

TEST(IntentArch, UpstreamReplayReadsBothArchitectures) {
  const Intent one = intent_from_upstream(nlohmann::json{{"architecture", "sm_90a"}, {"operator_terms", {"rms_norm"}}});
  EXPECT_EQ(one.exact_arches(), Arches{"hopper"});
  const Intent two = intent_from_upstream(nlohmann::json{{"architecture", "gfx942 vs gfx950"}, {"operator_terms", {"gemm"}}});
  EXPECT_EQ(two.vendor, "amd");
  EXPECT_EQ(two.exact_arches(), (Arches{"cdna3", "cdna4"}));
}

TEST(IntentWords, HexLiteralIsAWordNumbersAreNot) {
  const Intent i = extract_intent("fp8 kernel on mi300x writes 0x80 bytes for 4096 rows");
  const auto& f = i.free_terms;
  EXPECT_NE(std::find(f.begin(), f.end(), "0x80"), f.end());
  EXPECT_EQ(std::find(f.begin(), f.end(), "4096"), f.end());
}

}  // namespace
}  // namespace kwiki
