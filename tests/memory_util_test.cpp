// Tests of kwiki memory (typing, refusals, atomicity) and kwiki util (arithmetic, citations).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "kwiki/error.hpp"
#include "kwiki/memory.hpp"
#include "test_support.hpp"

namespace kwiki {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;
using test::RunResult;
using test::TempDir;
using test::run_kwiki;

ErrorCode code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::kInternal;
}

TEST(Memory, VersionsAreStrict) {
  EXPECT_TRUE(MemoryStore::valid_version("v0"));
  EXPECT_TRUE(MemoryStore::valid_version("v12"));
  for (const char* bad : {"vlong", "v01", "v-1", "V1", "v1.0", "v", "1", "v1a", "v9999999"}) EXPECT_FALSE(MemoryStore::valid_version(bad)) << bad;
}

TEST(Memory, AssignmentsAreTyped) {
  EXPECT_EQ(MemoryStore::parse_assignment("a.b=12.5").second, ordered_json(12.5));
  EXPECT_EQ(MemoryStore::parse_assignment("a=true").second, ordered_json(true));
  EXPECT_TRUE(MemoryStore::parse_assignment("a=null").second.is_null());
  EXPECT_EQ(MemoryStore::parse_assignment("a=\"12\"").second, ordered_json("12"));
  EXPECT_EQ(MemoryStore::parse_assignment("a=fused the add").second, ordered_json("fused the add"));
  EXPECT_EQ(MemoryStore::parse_assignment("a=[1,2]").second, ordered_json::array({1, 2}));
  EXPECT_EQ(code_of([] { MemoryStore::parse_assignment("no-equals"); }), ErrorCode::kUsage);
}

TEST(Memory, CreateReadUpdateAndSchemaRefusals) {
  TempDir dir;
  const MemoryStore store(dir.path());
  store.create("v0");
  EXPECT_EQ(store.read("v0")["correctness"]["status"], "NOT_RUN");
  EXPECT_EQ(code_of([&] { store.create("v0"); }), ErrorCode::kBadInput);  // exists
  EXPECT_EQ(code_of([&] { store.create("vlong"); }), ErrorCode::kBadInput);
  store.update("v0", {{"performance.latency_us", 12.5}, {"correctness.status", "PASS"}});
  EXPECT_DOUBLE_EQ(store.read("v0")["performance"]["latency_us"].get<double>(), 12.5);
  // A status outside the enum (MAYBE), a string latency and unknown fields are refused, and the
  // file keeps its previous content.
  const std::string before = test::read_text(dir / "memory/v0.json");
  EXPECT_EQ(code_of([&] { store.update("v0", {{"correctness.status", "MAYBE"}}); }), ErrorCode::kSchemaViolation);
  EXPECT_EQ(code_of([&] { store.update("v0", {{"performance.latency_us", "fast"}}); }), ErrorCode::kSchemaViolation);
  EXPECT_EQ(code_of([&] { store.update("v0", {{"performance.made_up", 1}}); }), ErrorCode::kSchemaViolation);
  EXPECT_EQ(code_of([&] { store.update("v0", {{"version", "v1"}}); }), ErrorCode::kUsage);
  EXPECT_EQ(test::read_text(dir / "memory/v0.json"), before);
  for (const auto& e : fs::directory_iterator(dir / "memory")) EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos);
}

TEST(Memory, MaskedReadsAreRefusedAndLatestSkipsThem) {
  TempDir dir;
  const MemoryStore store(dir.path());
  store.create("v0");
  store.create("v1");
  store.create("v2");
  store.set_masked("v2", true);
  EXPECT_EQ(code_of([&] { store.read("v2"); }), ErrorCode::kBadInput);
  EXPECT_EQ(store.read("v2", true)["masked"], true);
  EXPECT_EQ(store.latest(), "v1");
  EXPECT_EQ(store.list(), (std::vector<std::string>{"v0", "v1", "v2"}));
  store.set_masked("v2", false);
  EXPECT_EQ(store.latest(), "v2");
  EXPECT_EQ(store.summary().size(), 3u);
}

TEST(Memory, ListOrdersVersionsNumerically) {
  TempDir dir;
  const MemoryStore store(dir.path());
  for (const char* v : {"v10", "v2", "v1"}) store.create(v);
  EXPECT_EQ(store.list(), (std::vector<std::string>{"v1", "v2", "v10"}));
}

TEST(Memory, CliRoundTrip) {
  TempDir dir;
  EXPECT_EQ(run_kwiki({"memory", "init", "--workspace", dir.path()}).exit_code, 0);
  EXPECT_TRUE(fs::exists(dir / "memory/schema.json"));
  EXPECT_EQ(run_kwiki({"memory", "create", "--workspace", dir.path(), "--version", "v0", "--set", "optimization.action_description=first try"}).exit_code, 0);
  const RunResult u = run_kwiki({"memory", "update", "--workspace", dir.path(), "--version", "v0", "--set", "performance.latency_us=42", "--json"});
  ASSERT_EQ(u.exit_code, 0) << u.out;
  EXPECT_EQ(json::parse(u.out)["performance"]["latency_us"], 42);
  const RunResult bad = run_kwiki({"memory", "update", "--workspace", dir.path(), "--version", "v0", "--set", "correctness.status=MAYBE"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(json::parse(bad.out)["error"]["pointer"], "/correctness/status");
  EXPECT_EQ(run_kwiki({"memory", "read", "--workspace", dir.path(), "--version", "vlong"}).exit_code, 2);
  const RunResult summary = run_kwiki({"memory", "summary", "--workspace", dir.path(), "--text"});
  EXPECT_NE(summary.out.find("first try"), std::string::npos);
  EXPECT_EQ(run_kwiki({"memory", "latest", "--workspace", (dir / "empty")}).exit_code, 1);
}

class UtilCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    ASSERT_EQ(run_kwiki({"index", "--wiki", test::bundled_wiki(), "--index", index()}).exit_code, 0);
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string index() { return (*dir_) / "index"; }
  static TempDir* dir_;
};
TempDir* UtilCli::dir_ = nullptr;

TEST_F(UtilCli, ArithmeticAgainstCitedPeaks) {
  // 2*4096^3 FLOPs in 0.2 ms = 687.2 TFLOPS; 100 MB in 0.2 ms = 500 GB/s.
  const RunResult r = run_kwiki({"util", "--gpu", "H200", "--dtype", "bf16", "--flops", "137438953472", "--bytes", "100000000", "--time-ms", "0.2",
                                 "--grid-blocks", "1000", "--index", index(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const json u = json::parse(r.out);
  EXPECT_NEAR(u["tflops"].get<double>(), 687.194767, 1e-3);
  EXPECT_NEAR(u["gbps"].get<double>(), 500.0, 1e-9);
  const json& matrix = u["peaks"][0];
  EXPECT_EQ(matrix["citation"], "nvidia.hopper.spec-sheet.h200-sxm:peak_compute.bf16.dense");
  EXPECT_NEAR(matrix["pct"].get<double>(), 69.45, 0.01);
  bool bandwidth = false;
  for (const auto& p : u["peaks"])
    if (p["name"] == "HBM bandwidth") {
      bandwidth = true;
      EXPECT_NEAR(p["pct"].get<double>(), 10.42, 0.01);
    }
  EXPECT_TRUE(bandwidth);
  EXPECT_NEAR(u["pct_of_sol"].get<double>(), 69.45, 0.01);  // compute-bound: SOL = FLOPs / peak
  EXPECT_NEAR(u["grid"]["waves_at_one_block_per_unit"].get<double>(), 1000.0 / 132, 1e-9);
  EXPECT_NEAR(u["grid"]["last_wave_fill_pct"].get<double>(), 100.0 * (1000 % 132) / 132, 0.01);
}

TEST_F(UtilCli, VectorWorkUsesTheVectorPeak) {
  const RunResult r = run_kwiki({"util", "--gpu", "MI300X", "--dtype", "fp32", "--flops", "1e9", "--time-ms", "1", "--index", index(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(json::parse(r.out)["peaks"][0]["citation"], "amd.cdna3.spec-sheet.mi300x:peak_compute.fp32.vector.dense");
}

TEST_F(UtilCli, Refusals) {
  EXPECT_EQ(run_kwiki({"util", "--gpu", "H200", "--flops", "1", "--time-ms", "0", "--index", index()}).exit_code, 2);
  EXPECT_EQ(run_kwiki({"util", "--gpu", "H200", "--time-ms", "1", "--index", index()}).exit_code, 2);
  EXPECT_EQ(run_kwiki({"util", "--gpu", "RTX 4090", "--flops", "1", "--time-ms", "1", "--index", index()}).exit_code, 3);
}

}  // namespace
}  // namespace kwiki
