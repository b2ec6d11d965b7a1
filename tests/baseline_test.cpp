// Tests of kwiki baseline: generation and build without a GPU (CI), and on an H200 the harness
// catching a planted off-by-one, a hanging kernel and a NaN-producing kernel (label gpu).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "subprocess.hpp"
#include "test_support.hpp"

namespace kwiki {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::RunResult;
using test::TempDir;
using test::run_kwiki;

bool nvidia_gpu_present() { return std::system("nvidia-smi -L > /dev/null 2>&1") == 0; }
bool torch_present() { return std::system((test::shell_quote(KWIKI_TEST_PYTHON) + " -c 'import torch' > /dev/null 2>&1").c_str()) == 0; }

class Baseline : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    ASSERT_EQ(run_kwiki({"index", "--wiki", test::bundled_wiki(), "--index", index()}).exit_code, 0);
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string index() { return (*dir_) / "index"; }
  static std::string plan(const std::string& task, const std::string& gpu, const std::string& name) {
    return plan_at(std::string(KWIKI_SOURCE_DIR) + "/data/tasks/" + task, gpu, name);
  }
  static std::string plan_at(const std::string& task_path, const std::string& gpu, const std::string& name) {
    const std::string ws = (*dir_) / name;
    const RunResult r = run_kwiki({"plan", "--task", task_path, "--gpu", gpu, "--workspace", ws, "--index", index(), "--force"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return ws;
  }
  /// kwiki baseline on a plan of `task` whose pattern name was changed to `pattern` afterwards.
  static TempDir* dir_;
};
TempDir* Baseline::dir_ = nullptr;

TEST_F(Baseline, WithoutADeviceItGeneratesCompilesReportsAndSaysNotMeasured) {
  if (nvidia_gpu_present()) GTEST_SKIP() << "a GPU is present; this test covers the no-device path";
  const std::string ws = plan("rms_norm", "H200", "ws-nodevice");
  const RunResult r = run_kwiki({"baseline", "--workspace", ws, "--json"});
  const json j = json::parse(r.out);
  EXPECT_EQ(r.exit_code, 5) << r.out << r.err;  // built, not measured
  EXPECT_EQ(j["status"], "NOT_RUN");
  EXPECT_FALSE(j["measured"].get<bool>());
  for (const char* f : {"kernel.cu", "kernel.py", "test_kernel.py", "reference.py", "baseline_report.md", "memory/v0.json"})
    EXPECT_TRUE(fs::exists(ws + "/" + f)) << f;
  const std::string report = test::read_text(ws + "/baseline_report.md");
  EXPECT_NE(report.find("not measured"), std::string::npos);
  const json memory = json::parse(test::read_text(ws + "/memory/v0.json"));
  EXPECT_TRUE(memory["performance"]["latency_us"].is_null());
  EXPECT_EQ(memory["quality_gate"]["result"], "not_measured");
  if (j["compiled"].get<bool>()) {
    EXPECT_TRUE(fs::exists(ws + "/build/kernel.so"));
    EXPECT_EQ(j["static_evidence"]["spill_bytes"], 0);
  }
  FILE* log = ::popen(("cd " + test::shell_quote(ws) + " && git log --format=%s").c_str(), "r");
  char buf[512] = {};
  std::string subjects;
  while (std::fgets(buf, sizeof buf, log)) subjects += buf;
  ::pclose(log);
  EXPECT_NE(subjects.find("V0: baseline kernel"), std::string::npos) << subjects;
}

// A row sum (tests/data/row_reduce_task): the plan records the op, the shim gets it, the row_reduce
// template compiles with 16-byte loads and no spills, and without a device nothing is measured.
TEST_F(Baseline, RowReduceTaskGeneratesTheTemplateWithItsOpAndSaysNotMeasured) {
  if (nvidia_gpu_present()) GTEST_SKIP() << "a GPU is present; this test covers the no-device path";
  const std::string ws = plan_at(std::string(KWIKI_SOURCE_DIR) + "/tests/data/row_reduce_task", "H200", "ws-row-reduce");
  const json plan_json = json::parse(test::read_text(ws + "/plans/v0_plan.json"));
  EXPECT_EQ(plan_json["pattern"]["name"], "row_reduce");
  EXPECT_EQ(plan_json["family"]["binding"]["params"]["op"], 0);  // sum, as its twin proved
  EXPECT_EQ(plan_json["family"]["binding"]["params"]["keepdim"], false);
  const RunResult r = run_kwiki({"baseline", "--workspace", ws, "--json", "--no-commit"});
  EXPECT_EQ(r.exit_code, 5) << r.out << r.err;  // built, not measured
  const json j = json::parse(r.out);
  EXPECT_EQ(j["status"], "NOT_RUN");
  EXPECT_FALSE(j["measured"].get<bool>());
  EXPECT_NE(test::read_text(ws + "/kernel.cu").find("kwiki_row_reduce::launch"), std::string::npos);
  const std::string shim = test::read_text(ws + "/kernel.py");
  EXPECT_NE(shim.find("\"op\":0"), std::string::npos) << "kernel.py carries the proven binding";
  EXPECT_EQ(shim.find("@BINDING@"), std::string::npos) << "a placeholder was left in kernel.py";
  EXPECT_NE(test::read_text(ws + "/baseline_report.md").find("not measured"), std::string::npos);
  if (j["compiled"].get<bool>()) {
    EXPECT_TRUE(fs::exists(ws + "/build/kernel.so"));
    EXPECT_EQ(j["static_evidence"]["spill_bytes"], 0);
  }
}

// The CUDA kernel library exports the launcher ABI and nothing else. The gemm template caches "the
// shared-memory attribute is set" in a static local; exported (GNU-unique), that cache was shared by
// every gemm kernel.so loaded into one process, and the second one's launch failed with code 1.
TEST_F(Baseline, KernelLibraryExportsOnlyTheLauncherAbi) {
  if (nvidia_gpu_present()) GTEST_SKIP() << "a GPU is present; this test covers the no-device path";
  const std::string nm = detail::find_program("nm");
  if (nm.empty()) GTEST_SKIP() << "no nm (binutils) on PATH to read the library's symbols";
  const std::string ws = plan("hf_linear_no_bias", "H200", "ws-exports");
  const RunResult r = run_kwiki({"baseline", "--workspace", ws, "--json", "--no-commit"});
  ASSERT_EQ(r.exit_code, 5) << r.out << r.err;
  if (!json::parse(r.out)["compiled"].get<bool>()) GTEST_SKIP() << "no CUDA compiler here: nothing was linked";
  detail::ProcessSpec spec;
  spec.argv = {nm, "-D", "--defined-only", ws + "/build/kernel.so"};
  spec.timeout_seconds = 60;
  const detail::ProcessResult symbols = detail::run_process(spec);
  ASSERT_TRUE(symbols.ok()) << symbols.out << symbols.error;
  std::vector<std::string> names;
  std::istringstream lines(symbols.out);
  for (std::string line; std::getline(lines, line);) {
    const std::size_t space = line.rfind(' ');
    if (space != std::string::npos) names.push_back(line.substr(space + 1));
  }
  EXPECT_EQ(names, (std::vector<std::string>{"kwiki_abi_version", "kwiki_launch"})) << symbols.out;
}

// A plan edited to name a family kwiki does not have is refused, not guessed.
TEST_F(Baseline, PlanNamingAnUnknownFamilyIsRefused) {
  const std::string ws = plan("softmax", "H200", "ws-edited-family");
  json p = json::parse(test::read_text(ws + "/plans/v0_plan.json"));
  ASSERT_TRUE(p.contains("family")) << "softmax is proven where torch runs";
  p["family"]["name"] = "scan";
  test::write_text(ws + "/plans/v0_plan.json", p.dump());
  const RunResult r = run_kwiki({"baseline", "--workspace", ws, "--no-commit"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("does not have"), std::string::npos) << r.out;
}

bool hip_toolchain_present() {
  return std::system("command -v clang++-19 > /dev/null 2>&1") == 0 && fs::exists("/usr/include/hip/hip_runtime.h") &&
         fs::exists("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode/ockl.bc");
}

// CDNA3: the GEMM becomes HIP C++, compiles for gfx942 with MFMA in its listing, and, with no AMD
// device here, the report and memory say so instead of inventing a number.
TEST_F(Baseline, Mi300xGemmCompilesToMfmaAndSaysNotMeasured) {
  if (!hip_toolchain_present()) GTEST_SKIP() << "clang-19 and Debian's HIP headers are not installed (scripts/dev.sh deps)";
  const std::string ws = plan("linear_bf16", "MI300X", "ws-mi300x");
  const RunResult r = run_kwiki({"baseline", "--workspace", ws, "--json", "--no-commit"});
  EXPECT_EQ(r.exit_code, 5) << r.out << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["status"], "NOT_RUN");
  EXPECT_EQ(j["not_measured_because"], "no AMD GPU");
  EXPECT_TRUE(fs::exists(ws + "/kernel.hip"));
  EXPECT_FALSE(fs::exists(ws + "/kernel.cu"));
  const json& ev = j["static_evidence"];
  EXPECT_EQ(ev["target"], "gfx942");
  ASSERT_TRUE(ev["compiled"].get<bool>()) << ev.dump();
  EXPECT_GT(ev["instructions"]["v_mfma"].get<int>(), 0);
  EXPECT_EQ(ev["spill_bytes"], 0);
  EXPECT_TRUE(fs::exists(ws + "/" + ev["listing"].get<std::string>()));
  const std::string report = test::read_text(ws + "/baseline_report.md");
  EXPECT_NE(report.find("gfx942"), std::string::npos);
  EXPECT_NE(report.find("no AMD GPU"), std::string::npos);
  const json memory = json::parse(test::read_text(ws + "/memory/v0.json"));
  EXPECT_TRUE(memory["performance"]["latency_us"].is_null());
}

// MI308X is CDNA3 too: the plan targets gfx942 and the report carries the same static evidence.
TEST_F(Baseline, Mi308xTargetsGfx942WithStaticEvidence) {
  if (!hip_toolchain_present()) GTEST_SKIP() << "clang-19 and Debian's HIP headers are not installed (scripts/dev.sh deps)";
  const std::string ws = plan("rms_norm", "MI308X", "ws-mi308x");
  const RunResult r = run_kwiki({"baseline", "--workspace", ws, "--json", "--no-commit"});
  EXPECT_EQ(r.exit_code, 5) << r.out << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["static_evidence"]["target"], "gfx942");
  ASSERT_TRUE(j["compiled"].get<bool>()) << j.dump();
  EXPECT_GT(j["static_evidence"]["instructions"]["global_load_dwordx4"].get<int>(), 0);
  EXPECT_NE(test::read_text(ws + "/baseline_report.md").find("no AMD GPU"), std::string::npos);
}

// CDNA4 needs LLVM 20; with clang-19 the kernel is still written and the report says why it was not built.
TEST_F(Baseline, Mi355xWithAnOlderClangSaysWhyItWasNotCompiled) {
  const std::string ws = plan("rms_norm", "MI355X", "ws-mi355x");
  const RunResult r = run_kwiki({"baseline", "--workspace", ws, "--json", "--no-commit"});
  const json j = json::parse(r.out);
  EXPECT_EQ(j["static_evidence"]["target"], "gfx950");
  EXPECT_TRUE(fs::exists(ws + "/kernel.hip"));
  if (!j["compiled"].get<bool>()) {
    // Nothing built is a build failure (exit 4) that says how to name a compiler, not "not measured".
    EXPECT_EQ(r.exit_code, 4) << r.out << r.err;
    EXPECT_NE(j["notes"].dump().find("KWIKI_HIPCC"), std::string::npos) << j.dump();
    EXPECT_NE(test::read_text(ws + "/baseline_report.md").find("gfx950"), std::string::npos);
  } else {
    EXPECT_EQ(r.exit_code, 5) << r.out << r.err;
  }
}

// No proven family and no --kernel: nothing is built; kernel_abi.h says what a kernel of yours implements.
TEST_F(Baseline, NoFamilyWithoutKernelIsRefusedAfterWritingTheLauncher) {
  const std::string ws = plan("rms_norm", "H200", "ws-unknown");
  json p = json::parse(test::read_text(ws + "/plans/v0_plan.json"));
  p.erase("family");
  test::write_text(ws + "/plans/v0_plan.json", p.dump());
  const RunResult r = run_kwiki({"baseline", "--workspace", ws, "--no-commit"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("--kernel"), std::string::npos);
  EXPECT_TRUE(fs::exists(ws + "/kernel_abi.h"));
  EXPECT_FALSE(fs::exists(ws + "/kernel.cu"));
}

TEST_F(Baseline, KernelWithoutTheLauncherAbiIsRefused) {
  const std::string ws = plan("rms_norm", "H200", "ws-badabi");
  test::write_text((*dir_) / "noabi.cu", "__global__ void k() {}\n");
  const RunResult r = run_kwiki({"baseline", "--workspace", ws, "--kernel", (*dir_) / "noabi.cu", "--no-commit"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("kwiki_launch"), std::string::npos);
}

TEST_F(Baseline, WorkspaceWithoutPlanIsRefused) {
  const RunResult r = run_kwiki({"baseline", "--workspace", (*dir_) / "nothing-here"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("kwiki plan"), std::string::npos);
}

// ---- on the GPU (label gpu): the harness catches planted faults ----

class PlantedFault : public Baseline {
 protected:
  void SetUp() override {
    if (!nvidia_gpu_present()) GTEST_SKIP() << "no NVIDIA GPU here: planted-fault tests run on the H200";
    if (!torch_present()) GTEST_SKIP() << "torch is not importable here: the harness needs it";
  }
  json run_planted(const std::string& define, const std::string& name, int timeout) {
    const std::string ws = plan("rms_norm", "H200", name);
    const std::string kernel = (*dir_) / (name + ".cu");
    test::write_text(kernel, "#define " + define + " 1\n" +
                                 test::read_text(std::string(KWIKI_SOURCE_DIR) + "/data/fixtures/kernels/rms_norm_planted.cu"));
    const RunResult r = run_kwiki({"baseline", "--workspace", ws, "--kernel", kernel, "--shapes", "t1_h4096,t4096_h7168", "--timeout",
                                   std::to_string(timeout), "--allow-other-device", "--json"});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    return json::parse(r.out);
  }
};

TEST_F(PlantedFault, OffByOneIsAMismatch) {
  const json j = run_planted("PLANT_OFF_BY_ONE", "ws-offbyone", 60);
  EXPECT_EQ(j["status"], "MISMATCH");
  EXPECT_NE(j["result"]["failures"].dump().find("NaN"), std::string::npos);  // the unwritten column stays poisoned
}

TEST_F(PlantedFault, HangIsATimeoutAndTheRestGoOn) {
  const json j = run_planted("PLANT_HANG", "ws-hang", 20);
  EXPECT_EQ(j["status"], "TIMEOUT_FAIL");
  EXPECT_EQ(j["result"]["statuses"]["t1_h4096"], "TIMEOUT_FAIL");
  EXPECT_TRUE(j["result"]["statuses"].contains("t4096_h7168"));  // the next shape still ran
}

TEST_F(PlantedFault, NanIsCaught) {
  const json j = run_planted("PLANT_NAN", "ws-nan", 60);
  EXPECT_EQ(j["status"], "MISMATCH");
  EXPECT_NE(j["result"]["failures"].dump().find("NaN"), std::string::npos);
}

}  // namespace
}  // namespace kwiki
