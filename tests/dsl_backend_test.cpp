// The DSL backends (issue 21): for every task the generator lowers, kwiki plan --framework cutedsl
// (H200) and --framework flydsl (MI300X) and kwiki baseline write a kernel.py holding the DSL kernel,
// and the DSL compiles it for sm_90a / gfx942 on this machine (no GPU: the run and the timing wait
// for one); the gemm family's hand-written CuteDSL V0 (TMA + wgmma) likewise. The DSL wheels come
// from scripts/dev.sh dsl, through $KWIKI_DSL_PYTHON; without it these tests skip and say how to
// install them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace kwiki {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::RunResult;
using test::run_kwiki;
using test::TempDir;

constexpr int kExitNotMeasured = 5;  // kwiki baseline: compiled, no device of the plan to run on

using test::tasks_dir;

/// The python that has the DSL wheels (and torch), or "" when none was named.
std::string dsl_python() {
  const char* p = std::getenv("KWIKI_DSL_PYTHON");
  return p && *p ? p : "";
}

constexpr const char* kInstall = "set KWIKI_DSL_PYTHON to a python with nvidia-cutlass-dsl 4.8 and flydsl 0.4 (`scripts/dev.sh dsl` installs "
                                 "them into ./.venv-dsl and prints the line to export)";

class DslEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    dir = new TempDir();
    const RunResult r = run_kwiki({"index", "--wiki", test::bundled_wiki(), "--index", index()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  void TearDown() override { delete dir; }
  static std::string index() { return (*dir) / "index"; }
  static TempDir* dir;
};
TempDir* DslEnv::dir = nullptr;
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new DslEnv);

std::vector<std::string> generated_task_names() { return test::data_task_names(true); }

// The plan's framework is checked against its vendor, recorded, and carried into the plan's text.
TEST(Framework, RecordedAndCheckedAgainstTheVendor) {
  TempDir dir;
  const std::string task = tasks_dir() + "/rms_norm";
  const RunResult bad = run_kwiki({"plan", "--task", task, "--gpu", "MI300X", "--framework", "cutedsl", "--workspace", dir / "a", "--index",
                                   DslEnv::index(), "--no-dry-run", "--json"});
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("flydsl"), std::string::npos) << "the error names the AMD frameworks: " << bad.err;
  const RunResult unknown = run_kwiki({"plan", "--task", task, "--gpu", "H200", "--framework", "triton", "--workspace", dir / "b", "--index",
                                       DslEnv::index(), "--no-dry-run", "--json"});
  EXPECT_EQ(unknown.exit_code, 2) << unknown.out;
  for (const auto& [gpu, framework, language] : {std::tuple{"H200", "", "cuda"}, std::tuple{"MI300X", "", "hip"}, std::tuple{"H200", "cutedsl", "cutedsl"},
                                                 std::tuple{"MI300X", "flydsl", "flydsl"}}) {
    const std::string ws = dir / (std::string(gpu) + framework);
    std::vector<std::string> args = {"plan", "--task", task, "--gpu", gpu, "--workspace", ws, "--index", DslEnv::index(), "--no-dry-run", "--json"};
    if (*framework) args.insert(args.end(), {"--framework", framework});
    const RunResult r = run_kwiki(args);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(json::parse(r.out)["target"]["framework"], language) << r.out;
    EXPECT_EQ(json::parse(test::read_text(ws + "/plans/v0_plan.json"))["target"]["framework"], language);
    EXPECT_NE(test::read_text(ws + "/plans/v0_plan.md").find(std::string(", ") + language + ", `"), std::string::npos);
  }
}

// A plan is read back from a folder anyone may have written: a framework kwiki does not write for
// the plan's vendor is refused before anything is generated.
TEST(Framework, BaselineRefusesAFrameworkOfTheOtherVendor) {
  TempDir dir;
  const std::string ws = dir / "ws";
  ASSERT_EQ(run_kwiki({"plan", "--task", tasks_dir() + "/rms_norm", "--gpu", "H200", "--workspace", ws, "--index", DslEnv::index(), "--no-dry-run", "--json"})
                .exit_code,
            0);
  for (const char* word : {"flydsl", "$(touch pwned)"}) {
    json plan = json::parse(test::read_text(ws + "/plans/v0_plan.json"));
    plan["target"]["framework"] = word;
    test::write_text(ws + "/plans/v0_plan.json", plan.dump(2));
    const RunResult r = run_kwiki({"baseline", "--workspace", ws, "--no-commit", "--json"});
    EXPECT_EQ(r.exit_code, 2) << word << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("/target/framework"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(ws + "/kernel.py")) << "nothing is generated from a refused plan";
  }
}

// A DSL plan keeps the IR's proof: kernel.py is the DSL kernel, kernel_twin.py the CPU twin's Model,
// which kwiki baseline --device cpu checks against torch (no DSL needed).
TEST(Framework, DslPlanStillChecksTheCpuTwin) {
  TempDir dir;
  const std::string ws = dir / "ws";
  const RunResult p = run_kwiki({"plan", "--task", tasks_dir() + "/rms_norm", "--gpu", "H200", "--framework", "cutedsl", "--pattern", "generated",
                                 "--workspace", ws, "--index", DslEnv::index(), "--json"});
  ASSERT_EQ(p.exit_code, 0) << p.out << p.err;
  const json plan = json::parse(p.out);
  if (plan["pattern"]["name"] != "generated" && plan["notes"].dump().find("torch") != std::string::npos)
    GTEST_SKIP() << "no torch here: the generator's proof cannot run (scripts/dev.sh installs python3-torch)";
  ASSERT_EQ(plan["pattern"]["name"], "generated") << p.out.substr(0, 2000);
  const RunResult b = run_kwiki({"baseline", "--workspace", ws, "--device", "cpu", "--no-commit", "--json"});
  ASSERT_EQ(b.exit_code, 0) << b.out.substr(0, 2000) << test::read_text(ws + "/profiles/v0/test_kernel.log").substr(0, 3000);
  EXPECT_EQ(json::parse(b.out)["status"], "PASS");
  EXPECT_NE(test::read_text(ws + "/kernel.py").find("@cute.kernel"), std::string::npos);
  EXPECT_NE(test::read_text(ws + "/kernel_twin.py").find("kwiki_launch"), std::string::npos);
}

// The gemm family's CuteDSL V0 (baseline/kernels/gemm_cutedsl.py): a gemm task planned with
// --framework cutedsl keeps its family, and kwiki baseline writes kernel.py launching the DSL GEMM and
// compiles it for sm_90a: TMA tile copies (cp.async.bulk.tensor) and wgmma.mma_async in the PTX.
class GemmCuteDsl : public ::testing::TestWithParam<std::string> {
 protected:
  /// kwiki plan --framework cutedsl --pattern gemm on the H200; "" when the family was proven, else why not.
  std::string plan() {
    const RunResult p = run_kwiki({"plan", "--task", task_, "--gpu", "H200", "--framework", "cutedsl", "--pattern", "gemm", "--workspace", ws_, "--index",
                                   DslEnv::index(), "--force", "--json"});
    EXPECT_EQ(p.exit_code, 0) << p.out << p.err;
    const json j = json::parse(p.out, nullptr, false);
    if (!j.is_object()) return "the plan printed no JSON";
    if (j["pattern"]["name"] != "gemm" && j["notes"].dump().find("torch") != std::string::npos)
      return "no torch here: the family's proof cannot run (scripts/dev.sh installs python3-torch)";
    EXPECT_EQ(j["pattern"]["name"], "gemm") << p.out.substr(0, 2000);
    EXPECT_EQ(j["target"]["framework"], "cutedsl");
    const json saved = json::parse(test::read_text(ws_ + "/plans/v0_plan.json"));
    EXPECT_EQ(saved["design"]["template"], "gemm_tma_wgmma_cutedsl") << saved["design"].dump();
    return "";
  }
  TempDir dir_;
  std::string task_ = tasks_dir() + "/" + GetParam(), ws_ = dir_ / "ws";
};

TEST_P(GemmCuteDsl, CompilesForSm90aWithTmaAndWgmma) {
  if (dsl_python().empty()) GTEST_SKIP() << "no DSL here: " << kInstall;
  if (const std::string why = plan(); !why.empty()) GTEST_SKIP() << why;
  const RunResult b = run_kwiki({"baseline", "--workspace", ws_, "--no-commit", "--json"}, {{"KWIKI_DSL_PYTHON", dsl_python()}});
  const std::string log = test::read_text(ws_ + "/profiles/v0/dsl_compile.log");
  ASSERT_EQ(b.exit_code, kExitNotMeasured) << b.out.substr(0, 2000) << b.err << log.substr(log.size() > 6000 ? log.size() - 6000 : 0);
  const json j = json::parse(b.out);
  ASSERT_TRUE(j["compiled"].get<bool>()) << log.substr(log.size() > 6000 ? log.size() - 6000 : 0);
  const json& check = j["static_evidence"]["dsl_check"];
  EXPECT_EQ(check.value("target", ""), "sm_90a") << check.dump();
  EXPECT_EQ(check.value("skeleton", ""), "gemm_tma_wgmma") << check.dump();
  EXPECT_EQ(check["kernels"].size(), 3u) << "the TMA/wgmma kernel with and without bias, and the fallback: " << check.dump();
  // The PTX files themselves, not only the counts the check reports.
  for (const char* kernel : {"tma_wgmma", "tma_wgmma_bias"}) {
    const std::string ptx = test::read_text(check.value(std::string(kernel) + "_ptx", ""));
    EXPECT_NE(ptx.find(".target sm_90a"), std::string::npos) << kernel;
    EXPECT_NE(ptx.find("wgmma.mma_async"), std::string::npos) << kernel << ": no warpgroup MMA";
    EXPECT_NE(ptx.find("cp.async.bulk.tensor"), std::string::npos) << kernel << ": no TMA tile copy";
    EXPECT_NE(ptx.find("mbarrier.try_wait"), std::string::npos) << kernel << ": no mbarrier wait";
    EXPECT_GT(check[std::string(kernel) + "_instructions"].value("wgmma.mma_async", 0), 0) << check.dump();
    EXPECT_GT(check[std::string(kernel) + "_instructions"].value("cp.async.bulk.tensor", 0), 0) << check.dump();
    EXPECT_GT(check.value(std::string(kernel) + "_cubin_bytes", 0), 0) << check.dump();
  }
  EXPECT_GT(check.value("simt_bias_cubin_bytes", 0), 0) << check.dump();
  const std::string py = test::read_text(ws_ + "/kernel.py");
  EXPECT_NE(py.find("@cute.kernel"), std::string::npos);
  EXPECT_NE(py.find("class TmaWgmmaGemm"), std::string::npos);
  EXPECT_EQ(py.find("self.ref("), std::string::npos) << "forward never calls the reference";
  EXPECT_EQ(py.find("@BINDING@"), std::string::npos) << "every slot of the template is filled";
  EXPECT_EQ(py.find("@TARGET@"), std::string::npos);
  EXPECT_NE(test::read_text(ws_ + "/kernel_twin.py").find("kwiki_launch"), std::string::npos);
}

// Without a GPU the plan's proof still holds: kwiki baseline --device cpu runs the gemm family's CPU
// twin through kernel_twin.py (the launcher ABI's Model) against the reference; no DSL is needed.
TEST_P(GemmCuteDsl, ChecksTheCpuTwin) {
  if (const std::string why = plan(); !why.empty()) GTEST_SKIP() << why;
  const RunResult b = run_kwiki({"baseline", "--workspace", ws_, "--device", "cpu", "--no-commit", "--json"});
  ASSERT_EQ(b.exit_code, 0) << b.out.substr(0, 2000) << test::read_text(ws_ + "/profiles/v0/test_kernel.log").substr(0, 3000);
  EXPECT_EQ(json::parse(b.out)["status"], "PASS");
  EXPECT_NE(test::read_text(ws_ + "/kernel.py").find("TmaWgmmaGemm"), std::string::npos) << "kernel.py is the DSL GEMM also here";
}

INSTANTIATE_TEST_SUITE_P(GemmTasks, GemmCuteDsl, ::testing::Values("linear_bf16", "f_linear_with_bias_inputs"));

// Without --pattern, a CuteDSL plan of a matrix product takes the gemm family's own CuteDSL V0 (it passed
// every shape on the H200 in session 16: bench/results/check_gemm_cutedsl_h200-session16.txt).
TEST(Framework, PlanTakesTheGemmFamilysCuteDslKernel) {
  TempDir dir;
  const RunResult p = run_kwiki({"plan", "--task", tasks_dir() + "/linear_bf16", "--gpu", "H200", "--framework", "cutedsl", "--workspace",
                                 dir / "ws", "--index", DslEnv::index(), "--json"});
  ASSERT_EQ(p.exit_code, 0) << p.out << p.err;
  const json j = json::parse(p.out);
  if (j["notes"].dump().find("family gemm proven") == std::string::npos) GTEST_SKIP() << "gemm was not proven here (no torch?): " << p.out.substr(0, 1000);
  EXPECT_EQ(j["pattern"]["name"], "gemm") << j["notes"].dump();
  EXPECT_EQ(j["notes"].dump().find("has no CuteDSL V0"), std::string::npos) << j["notes"].dump();
}

// A family without a DSL V0 gives way to the generator when the generator lowers the reference.
TEST(Framework, PlanTakesTheGeneratorForAFamilyWithoutADslKernel) {
  TempDir dir;
  const RunResult p = run_kwiki({"plan", "--task", tasks_dir() + "/rms_norm", "--gpu", "H200", "--framework", "cutedsl", "--workspace", dir / "ws",
                                 "--index", DslEnv::index(), "--json"});
  ASSERT_EQ(p.exit_code, 0) << p.out << p.err;
  const json j = json::parse(p.out);
  if (j["notes"].dump().find("proven family rms_norm") == std::string::npos) GTEST_SKIP() << "rms_norm was not proven here (no torch?): " << p.out.substr(0, 1000);
  EXPECT_EQ(j["pattern"]["name"], "generated") << j["notes"].dump();
}

// A family without a DSL V0 is refused by kwiki baseline, and the refusal names the ones that have one.
TEST(Framework, BaselineRefusesAFamilyWithoutADslKernel) {
  TempDir dir;
  const std::string ws = dir / "ws";
  const RunResult p = run_kwiki({"plan", "--task", tasks_dir() + "/rms_norm", "--gpu", "H200", "--framework", "cutedsl", "--pattern", "rms_norm",
                                 "--workspace", ws, "--index", DslEnv::index(), "--json"});
  ASSERT_EQ(p.exit_code, 0) << p.out << p.err;
  if (json::parse(p.out)["pattern"]["name"] != "rms_norm") GTEST_SKIP() << "rms_norm was not proven here (no torch?): " << p.out.substr(0, 1000);
  const RunResult r = run_kwiki({"baseline", "--workspace", ws, "--no-commit", "--json"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("the families gemm"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(ws + "/kernel.py"));
}

class DslBackend : public ::testing::TestWithParam<std::string> {
 protected:
  /// kwiki plan --pattern generated --framework `framework` for `gpu`, then kwiki baseline: the
  /// static evidence of the DSL's compile (kernel.py compiled for the target; nothing run).
  json plan_and_compile(const std::string& gpu, const std::string& framework) {
    const RunResult p = run_kwiki({"plan", "--task", task_, "--gpu", gpu, "--framework", framework, "--workspace", ws_, "--index", DslEnv::index(),
                                   "--pattern", "generated", "--force", "--json"});
    EXPECT_EQ(p.exit_code, 0) << p.out << p.err;
    if (p.exit_code != 0) return json();
    EXPECT_EQ(json::parse(p.out)["pattern"]["name"], "generated") << p.out.substr(0, 2000);
    const RunResult b = run_kwiki({"baseline", "--workspace", ws_, "--no-commit", "--json"}, {{"KWIKI_DSL_PYTHON", dsl_python()}});
    const json j = json::parse(b.out, nullptr, false);
    const std::string log = test::read_text(ws_ + "/profiles/v0/dsl_compile.log");
    EXPECT_EQ(b.exit_code, kExitNotMeasured) << b.out.substr(0, 2000) << b.err << log.substr(log.size() > 6000 ? log.size() - 6000 : 0);
    if (!j.is_object()) return json();
    EXPECT_TRUE(j["compiled"].get<bool>()) << log.substr(log.size() > 6000 ? log.size() - 6000 : 0);
    return j["static_evidence"];
  }
  TempDir dir_;
  std::string task_ = tasks_dir() + "/" + GetParam(), ws_ = dir_ / "ws";
  json expected_ = json::parse(test::read_text(task_ + "/expected.json"));
};

TEST_P(DslBackend, CuteDslCompilesForSm90a) {
  if (dsl_python().empty()) GTEST_SKIP() << "no DSL here: " << kInstall;
  if (expected_.contains("requires_torch"))
    GTEST_SKIP() << "the reference needs torch >= " << expected_["requires_torch"].get<std::string>() << " to be traced and proven";
  const json e = plan_and_compile("H200", "cutedsl");
  ASSERT_TRUE(e.is_object());
  const json& check = e["dsl_check"];
  EXPECT_EQ(check.value("target", ""), "sm_90a") << e.dump();
  EXPECT_GT(check.value("scalar_ptx_bytes", 0), 0) << e.dump();
  EXPECT_GT(check.value("scalar_cubin_bytes", 0), 0) << e.dump();
  // Where the IR has contiguous chunks, the vector kernel moves them with vector accesses (ld/st.global.v4 ...).
  if (check.value("vector_width", 1) > 1) {
    EXPECT_GT(check.value("vector_cubin_bytes", 0), 0) << e.dump();
    EXPECT_GT(check.value("vector_vector_accesses", 0), 0) << "no vector global accesses in the vector kernel: " << e.dump();
  }
  const std::string py = test::read_text(ws_ + "/kernel.py");
  EXPECT_NE(py.find("@cute.kernel"), std::string::npos);
  EXPECT_EQ(py.find("self.ref("), std::string::npos) << "forward never calls the reference";
}

TEST_P(DslBackend, FlyDslCompilesForGfx942) {
  if (dsl_python().empty()) GTEST_SKIP() << "no DSL here: " << kInstall;
  if (expected_.contains("requires_torch"))
    GTEST_SKIP() << "the reference needs torch >= " << expected_["requires_torch"].get<std::string>() << " to be traced and proven";
  const json e = plan_and_compile("MI300X", "flydsl");
  ASSERT_TRUE(e.is_object());
  const json& check = e["dsl_check"];
  EXPECT_EQ(check.value("target", ""), "gfx942") << e.dump();
  EXPECT_GT(check.value("scalar_isa_bytes", 0), 0) << e.dump();
  if (check.value("vector_width", 1) > 1) {
    EXPECT_GT(check.value("vector_vector_accesses", 0), 0) << "no dwordx2/x4 global accesses in the vector kernel: " << e.dump();
  }
  for (const auto& s : check.value("scratch_bytes", json::array())) EXPECT_EQ(s.get<int>(), 0) << "scratch: " << e.dump();
  EXPECT_NE(test::read_text(ws_ + "/kernel.py").find("@flyc.kernel"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(DataTasks, DslBackend, ::testing::ValuesIn(generated_task_names()), [](const auto& info) {
  std::string name = info.param;
  for (auto& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
});

}  // namespace
}  // namespace kwiki
