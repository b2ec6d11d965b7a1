// End-to-end tests of `kwiki query`, `kwiki hw` and `kwiki feedback` on hostile and edge input.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace kwiki::test {
namespace {

using nlohmann::json;

class QueryCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const RunResult r = run_kwiki({"index", "--wiki", bundled_wiki(), "--index", index()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string index() { return (*dir_) / "index"; }
  static RunResult query(std::vector<std::string> args) {
    args.insert(args.begin(), "query");
    args.insert(args.end(), {"--index", index(), "--json"});
    return run_kwiki(args);
  }
  static TempDir* dir_;
};
TempDir* QueryCli::dir_ = nullptr;

TEST_F(QueryCli, TwoHundredKilobyteRequestAnswersWithANote) {
  // One argv string is capped at 128 KiB by Linux, so a request this long comes on stdin ("-").
  std::string big;
  while (big.size() < 200 * 1024) big += "rmsnorm bandwidth H200 vectorized loads ";
  write_text((*dir_) / "big-request.txt", big);
  const RunResult r = run_kwiki({"query", "-", "--index", index(), "--json"}, {}, "", (*dir_) / "big-request.txt");
  ASSERT_EQ(r.exit_code, 0) << r.err.substr(0, 300);
  const json j = json::parse(r.out);
  EXPECT_NE(j["notes"].dump().find("read the first"), std::string::npos);
}

TEST_F(QueryCli, InvalidUtf8RequestIsStillJson) {
  const RunResult r = query({"rms\xff\xfenorm on \xc3 H200 \xed\xa0\x80"});
  EXPECT_LE(r.exit_code, 1) << r.err;
  EXPECT_NO_THROW(json::parse(r.out));
}

TEST_F(QueryCli, OnlyStopwordsIsNothingFound) {
  const RunResult r = query({"the and of to with"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(json::parse(r.out)["records"].empty());
}

TEST_F(QueryCli, MalformedIntentFileNamesTheFile) {
  write_text((*dir_) / "bad-intent.json", "{\"architecture\": \"sm_90a\", ");
  const RunResult r = query({"--intent", (*dir_) / "bad-intent.json"});
  EXPECT_EQ(r.exit_code, 2);
  const json j = json::parse(r.out);
  EXPECT_EQ(j["error"]["code"], "invalid_json");
  EXPECT_NE(j["error"]["file"].get<std::string>().find("bad-intent.json"), std::string::npos);
}

TEST_F(QueryCli, IntentSlotOfTheWrongTypeNamesThePointer) {
  write_text((*dir_) / "typed-intent.json", R"({"architecture": "sm_90a", "operator_terms": "rmsnorm"})");
  const RunResult r = query({"--intent", (*dir_) / "typed-intent.json"});
  EXPECT_EQ(r.exit_code, 2);
  const json j = json::parse(r.out);
  EXPECT_EQ(j["error"]["pointer"], "/operator_terms");
  EXPECT_NE(j["error"]["file"].get<std::string>().find("typed-intent.json"), std::string::npos);
}

TEST_F(QueryCli, MissingIntentFileIsAnInputError) {
  const RunResult r = query({"--intent", (*dir_) / "nope.json"});
  EXPECT_EQ(r.exit_code, 2);
}

TEST_F(QueryCli, MaxRecordsZeroIsUsage) {
  const RunResult r = query({"gemm", "--max-records", "0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(json::parse(r.out)["error"]["code"], "usage");
}

TEST_F(QueryCli, FeedbackOnAServedRecordIsRecorded) {
  const RunResult r = query({"fused add rmsnorm on H100"});
  ASSERT_EQ(r.exit_code, 0);
  const json answer = json::parse(r.out);
  const std::string query_id = answer["query_id"];
  const std::string first = answer["records"].begin().key();
  const RunResult fb = run_kwiki({"feedback", query_id, first, "--outcome", "effective", "--index", index(), "--json"});
  EXPECT_EQ(fb.exit_code, 0) << fb.out << fb.err;
  EXPECT_EQ(json::parse(fb.out)["recorded"], true);
}

TEST_F(QueryCli, FeedbackRefusals) {
  const RunResult unknown = run_kwiki({"feedback", "q-0000000000000000", "x", "--outcome", "applied", "--index", index()});
  EXPECT_EQ(unknown.exit_code, 2);
  const RunResult r = query({"softmax on H100"});
  const std::string query_id = json::parse(r.out)["query_id"];
  const RunResult not_served = run_kwiki({"feedback", query_id, "amd.cdna3.spec-sheet.mi300x", "--outcome", "applied", "--index", index()});
  EXPECT_EQ(not_served.exit_code, 2);
  EXPECT_NE(not_served.out.find("was not served"), std::string::npos);
  const RunResult bad_outcome = run_kwiki({"feedback", query_id, "x", "--outcome", "great", "--index", index()});
  EXPECT_EQ(bad_outcome.exit_code, 2);
}

TEST_F(QueryCli, HardwareVsRatioIsTheQuotient) {
  const RunResult r = run_kwiki({"hw", "--product", "H200", "--vs", "H20", "--field", "peak_compute.bf16.dense", "--index", index(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["comparison"].size(), 1u);
  const json& row = j["comparison"][0];
  EXPECT_DOUBLE_EQ(row["h200-sxm"].get<double>(), 989.5);
  EXPECT_DOUBLE_EQ(row["h20"].get<double>(), 148);
  EXPECT_NEAR(row["ratio"].get<double>(), 989.5 / 148, 1e-3);
}

TEST_F(QueryCli, HardwareRooflineComputesRidgePoints) {
  const RunResult r = run_kwiki({"hw", "--product", "MI300X", "--field", "roofline", "--index", index(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  bool found = false;
  const json answer = json::parse(r.out);
  for (const auto& f : answer["hardware"]) {
    if (f["field"] != "roofline.ridge_point.bf16") continue;
    found = true;
    EXPECT_NEAR(f["value"].get<double>(), 1307.4 / 5.3, 1e-6);
    EXPECT_EQ(f["provenance"]["derivation"], "peak_compute.bf16.dense / memory.bandwidth_tb_s");
  }
  EXPECT_TRUE(found);
}

TEST_F(QueryCli, TextOutputForTerminals) {
  const RunResult r = run_kwiki({"query", "rope neox layout", "--index", index(), "--text"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("1. "), std::string::npos);
  EXPECT_NE(r.out.find("note: scope"), std::string::npos);
}

TEST_F(QueryCli, TextShowsTheHardwareFactsWithValuesAndCitations) {
  const RunResult r = run_kwiki({"query", "what is the bf16 dense peak and memory bandwidth of H20", "--index", index(), "--text"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("h20 peak_compute.bf16.dense = 148 TFLOPS  [nvidia.hopper.spec-sheet.h20:peak_compute.bf16.dense, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("h20 memory.bandwidth_tb_s = 4.0 TB/s  [nvidia.hopper.spec-sheet.h20:memory.bandwidth_tb_s"), std::string::npos) << r.out;
}

TEST_F(QueryCli, GetServesARepeatedIdOnceAndNamesTheUnknown) {
  const std::string id = "amd.cdna3.spec-sheet.mi300x";
  const RunResult r = run_kwiki({"get", id, id, "no.such.id", "--index", index(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["records"].size(), 1u);
  EXPECT_NE(j["notes"].dump().find("repeated id served once: " + id), std::string::npos) << j["notes"];
  EXPECT_NE(j["notes"].dump().find("unknown id: no.such.id"), std::string::npos) << j["notes"];
  EXPECT_EQ(run_kwiki({"get", "no.such.id", "--index", index(), "--json"}).exit_code, 1);
}

TEST_F(QueryCli, BriefSourcesOnRequest) {
  const RunResult plain = query({"H200 memory bandwidth for my rmsnorm kernel", "--brief"});
  const RunResult sourced = query({"H200 memory bandwidth for my rmsnorm kernel", "--brief", "--sources"});
  ASSERT_EQ(plain.exit_code, 0);
  ASSERT_EQ(sourced.exit_code, 0);
  EXPECT_FALSE(json::parse(plain.out)["hardware"][0]["provenance"].contains("sources"));
  EXPECT_FALSE(json::parse(sourced.out)["hardware"][0]["provenance"]["sources"].empty());
}

TEST_F(QueryCli, HardwareFieldKeepsOnlyTheCeilingsThatMeasureIt) {
  const RunResult r = run_kwiki({"hw", "--product", "H200", "--field", "memory.bandwidth_tb_s", "--brief", "--index", index(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const json j = json::parse(r.out);
  EXPECT_TRUE(j["records"].contains("nvidia.hopper.measured-ceiling.h200-sxm-device-copy-bandwidth"));
  EXPECT_FALSE(j["records"].contains("nvidia.hopper.measured-ceiling.h200-sxm-gemm-rate-bf16"));
  ASSERT_EQ(j["hardware"].size(), 1u);
  EXPECT_FALSE(j["hardware"][0]["provenance"]["sources"].empty()) << "kwiki hw keeps the sources";
}

}  // namespace
}  // namespace kwiki::test
