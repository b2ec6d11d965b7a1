// Every task of data/tasks against its expected.json: kwiki plan claims the expected family (proven
// by its CPU twin), and then kwiki baseline --device cpu passes and an evaluator's import of
// kernel.py matches the reference; or kwiki plan claims none, names the near miss and the output
// that differs, and kwiki baseline builds nothing. Tasks needing a newer torch than the one here
// expect "unproven". Also: a user's CUDA kernel and a user's Python Model for a task with no family.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_support.hpp"

namespace kwiki {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::RunResult;
using test::run_kwiki;
using test::TempDir;

using test::tasks_dir;

// The torch version the tests' python imports ("" without torch), as (major, minor).
std::pair<int, int> torch_version() {
  static const std::pair<int, int> version = [] {
    TempDir dir;
    const std::string out = dir / "v";
    const std::string cmd = test::shell_quote(KWIKI_TEST_PYTHON) + " -c 'import torch; print(torch.__version__)' > " + test::shell_quote(out) + " 2>/dev/null";
    if (std::system(cmd.c_str()) != 0) return std::make_pair(0, 0);
    int major = 0, minor = 0;
    char dot;
    std::istringstream(test::read_text(out)) >> major >> dot >> minor;
    return std::make_pair(major, minor);
  }();
  return version;
}

bool at_least(const std::string& required) {
  int major = 0, minor = 0;
  char dot;
  std::istringstream(required) >> major >> dot >> minor;
  return torch_version() >= std::make_pair(major, minor);
}

class TaskEnv : public ::testing::Environment {
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
TempDir* TaskEnv::dir = nullptr;
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new TaskEnv);

std::vector<std::string> task_names() { return test::data_task_names(); }

class Task : public ::testing::TestWithParam<std::string> {};

TEST_P(Task, PlanClaimsOnlyAProvenFamily) {
  if (torch_version().first == 0) GTEST_SKIP() << KWIKI_TEST_PYTHON << " has no torch: no proof can run (scripts/dev.sh installs python3-torch)";
  const std::string task = tasks_dir() + "/" + GetParam();
  const json expected = json::parse(test::read_text(task + "/expected.json"));
  TempDir dir;
  const std::string ws = dir / "ws";
  const RunResult plan = run_kwiki({"plan", "--task", task, "--gpu", "H200", "--workspace", ws, "--index", TaskEnv::index(), "--json"});
  ASSERT_EQ(plan.exit_code, 0) << plan.out << plan.err;
  const json j = json::parse(plan.out);
  const std::string claimed = j["pattern"]["name"];
  const json proof = json::parse(test::read_text(ws + "/plans/proof.json"));
  const bool runnable = !expected.contains("requires_torch") || at_least(expected["requires_torch"]);
  const std::string notes = j["notes"].dump();
  if (!runnable) {
    EXPECT_EQ(claimed, "unknown") << "no family may be claimed without a proof";
    EXPECT_NE(notes.find("unproven"), std::string::npos) << notes;
    return;
  }
  // A near miss (a trap for a pattern matcher) is never proven, and the proof says why.
  if (expected.contains("near_miss") && expected["near_miss"].is_string()) {
    const std::string near = expected["near_miss"];
    const std::string differs = expected.value("differs", "");
    bool found = false;
    for (const auto& f : proof["families"]) {
      if (f["family"] != near) continue;
      found = true;
      EXPECT_FALSE(f["proven"].get<bool>());
      const std::string why = f["why"];
      if (differs == "interface") {
        EXPECT_NE(why.find("does not fit"), std::string::npos) << near << ": " << why;
      } else if (!differs.empty()) {
        EXPECT_NE(why.find(differs), std::string::npos) << near << " should name output " << differs << ": " << why;
      }
    }
    EXPECT_TRUE(found) << near << " was not tried";
  }
  if (expected["family"].is_string()) {
    ASSERT_EQ(claimed, expected["family"].get<std::string>()) << "proof: " << proof.dump(1).substr(0, 3000);
    // 120 s a case: the CPU runs the reference and the twin at the given sizes, on a loaded machine.
    const RunResult base = run_kwiki({"baseline", "--workspace", ws, "--device", "cpu", "--timeout", "120", "--no-commit", "--json"});
    ASSERT_EQ(base.exit_code, 0) << base.out.substr(0, 2000) << base.err << test::read_text(ws + "/profiles/v0/test_kernel.log").substr(0, 3000);
    EXPECT_EQ(json::parse(base.out)["status"], "PASS");
    const std::string cmd = test::shell_quote(KWIKI_TEST_PYTHON) + " " + test::shell_quote(std::string(KWIKI_SOURCE_DIR) + "/tests/evaluator_import.py") + " " +
                            test::shell_quote(ws) + " > " + test::shell_quote(dir / "eval.log") + " 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << test::read_text(dir / "eval.log");
    return;
  }
  EXPECT_EQ(claimed, "unknown") << "a near miss was claimed: " << proof.dump(1).substr(0, 3000);
  EXPECT_NE(notes.find("no V0"), std::string::npos) << notes;
  // And nothing is built for it: baseline without --kernel refuses, after writing kernel_abi.h.
  const RunResult base = run_kwiki({"baseline", "--workspace", ws, "--device", "cpu", "--no-commit", "--json"});
  EXPECT_EQ(base.exit_code, 2) << base.out;
  EXPECT_TRUE(fs::exists(ws + "/kernel_abi.h"));
  EXPECT_FALSE(fs::exists(ws + "/kernel.cu"));
  EXPECT_FALSE(fs::exists(ws + "/build/kernel_cpu.so"));
}

INSTANTIATE_TEST_SUITE_P(DataTasks, Task, ::testing::ValuesIn(task_names()), [](const auto& info) {
  std::string name = info.param;
  for (auto& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
});

TEST(Tasks, AtLeastFortyWithExpectedOutcomes) { EXPECT_GE(task_names().size(), 40u); }

// ---- the generator (issue 19): every task it must lower, forced with --pattern generated ----

std::vector<std::string> generated_task_names() { return test::data_task_names(true); }

/// Whether `program` is an executable file in a $PATH folder (no shell).
bool have(const char* program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::error_code ec;
    const fs::path p = fs::path(dir.empty() ? "." : dir) / program;
    if (fs::is_regular_file(p, ec) && (fs::status(p, ec).permissions() & (fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec)) != fs::perms::none) return true;
  }
  return false;
}

class Generated : public ::testing::TestWithParam<std::string> {
 protected:
  // kwiki plan --pattern generated for `gpu`: the generator's kernel, proven by its CPU twin.
  void plan(const std::string& gpu) {
    const RunResult r = run_kwiki({"plan", "--task", task_, "--gpu", gpu, "--workspace", ws_, "--index", TaskEnv::index(), "--pattern", "generated",
                                   "--force", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const json plan = json::parse(test::read_text(ws_ + "/plans/v0_plan.json"));
    ASSERT_EQ(json::parse(r.out)["pattern"]["name"], "generated") << plan.value("generator", json()).dump(1) << "\n" << plan["proof"].dump(1).substr(0, 2000);
    ASSERT_TRUE(fs::exists(ws_ + "/plans/kernel_ir.json"));
  }
  // kwiki baseline on this machine (no GPU in CI): built, its static evidence.
  json build() {
    const RunResult r = run_kwiki({"baseline", "--workspace", ws_, "--no-commit", "--json"});
    const json j = json::parse(r.out);
    EXPECT_TRUE(j["static_evidence"].value("compiled", false)) << r.out.substr(0, 1500) << test::read_text(ws_ + "/profiles/v0/build.log").substr(0, 3000);
    return j["static_evidence"];
  }
  TempDir dir_;
  std::string task_ = tasks_dir() + "/" + GetParam(), ws_ = dir_ / "ws";
  json expected_ = json::parse(test::read_text(task_ + "/expected.json"));
};

TEST_P(Generated, CpuTwinPassesAndCudaAndHipCompile) {
  if (torch_version().first == 0) GTEST_SKIP() << KWIKI_TEST_PYTHON << " has no torch: no proof can run (scripts/dev.sh installs python3-torch)";
  if (expected_.contains("requires_torch") && !at_least(expected_["requires_torch"]))
    GTEST_SKIP() << "the reference needs torch >= " << expected_["requires_torch"].get<std::string>() << " (scripts/dev.sh torch2; KWIKI_PYTHON)";
  plan("H200");
  // 1. The CPU kernel (the IR's twin) through the harness against torch, and an evaluator's import.
  const RunResult cpu = run_kwiki({"baseline", "--workspace", ws_, "--device", "cpu", "--timeout", "120", "--no-commit", "--json"});
  ASSERT_EQ(cpu.exit_code, 0) << cpu.out.substr(0, 2000) << test::read_text(ws_ + "/profiles/v0/test_kernel.log").substr(0, 3000);
  EXPECT_EQ(json::parse(cpu.out)["status"], "PASS");
  const std::string cmd = test::shell_quote(KWIKI_TEST_PYTHON) + " " + test::shell_quote(std::string(KWIKI_SOURCE_DIR) + "/tests/evaluator_import.py") + " " +
                          test::shell_quote(ws_) + " > " + test::shell_quote(dir_ / "eval.log") + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << test::read_text(dir_ / "eval.log");
  // 2. CUDA for sm_90a: 16-byte global loads, no local-memory spills.
  if (have("nvcc") || fs::exists("/usr/local/cuda/bin/nvcc")) {
    const json e = build();
    EXPECT_EQ(e.value("target", ""), "sm_90a");
    EXPECT_EQ(e.value("spill_bytes", -1), 0) << e.dump();
    const json& n = e["instructions"];
    const int vec = n.value("LDG.E.128", 0) + n.value("ld.global.v4 (16-byte loads)", 0);
    // A reduction along a strided axis has no 16-byte chunks (expected.json says so, and why).
    if (expected_.contains("generator_scalar_loads")) EXPECT_EQ(vec, 0) << e.dump();
    else EXPECT_GT(vec, 0) << "no 16-byte global loads: " << e.dump();
  } else {
    std::cout << "[ NOTE ] no nvcc here: the CUDA source was not compiled\n";
  }
  // 3. HIP for gfx942: dwordx4 global loads, no scratch.
  if (!have("clang++-19")) GTEST_SKIP() << "no clang++-19 here: the HIP source was not compiled (scripts/dev.sh installs it)";
  plan("MI300X");
  const json e = build();
  EXPECT_EQ(e.value("target", ""), "gfx942");
  EXPECT_EQ(e.value("scratch_bytes", -1), 0) << e.dump();
  if (!expected_.contains("generator_scalar_loads")) {
    EXPECT_GT(e["instructions"].value("global_load_dwordx4", 0), 0) << e.dump();
  }
}

INSTANTIATE_TEST_SUITE_P(DataTasks, Generated, ::testing::ValuesIn(generated_task_names()), [](const auto& info) {
  std::string name = info.param;
  for (auto& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
});

TEST(Generated, LowersAtLeastThirtyTasks) { EXPECT_GE(generated_task_names().size(), 30u); }

// scores / self.temperature (a Python float) lowers to div_scalar: the CUDA kernel multiplies by the number's
// correctly rounded fp32 reciprocal, as torch's GPU division by a CPU scalar does; softmax's exp / sum, a
// division by a tensor, stays a true division. The CPU twin divides both (torch on the CPU does).
TEST(Generated, ADivisionByAPythonNumberIsTorchsGpuReciprocal) {
  if (torch_version().first == 0) GTEST_SKIP() << KWIKI_TEST_PYTHON << " has no torch: no proof can run (scripts/dev.sh installs python3-torch)";
  TempDir dir;
  const std::string ws = dir / "ws";
  const RunResult r = run_kwiki({"plan", "--task", tasks_dir() + "/softmax_with_temperature", "--gpu", "H200", "--workspace", ws, "--index",
                                 TaskEnv::index(), "--pattern", "generated", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json ir = json::parse(test::read_text(ws + "/plans/kernel_ir.json"));
  int scalar = 0, tensor = 0;
  const std::function<void(const json&)> count = [&](const json& j) {
    if (j.is_object()) {
      if (j.contains("pw") && j["pw"] == "div_scalar") ++scalar;
      if (j.contains("pw") && j["pw"] == "div") ++tensor;
      for (const auto& [k, v] : j.items()) count(v);
    } else if (j.is_array()) {
      for (const auto& v : j) count(v);
    }
  };
  count(ir);
  EXPECT_EQ(scalar, 1) << ir.dump().substr(0, 3000);
  EXPECT_GE(tensor, 1) << ir.dump().substr(0, 3000);
  if (!have("nvcc") && !fs::exists("/usr/local/cuda/bin/nvcc")) GTEST_SKIP() << "no nvcc here: the CUDA source is written by kwiki baseline's build";
  run_kwiki({"baseline", "--workspace", ws, "--no-commit", "--json"});
  const std::string cu = test::read_text(ws + "/kernel.cu");
  EXPECT_NE(cu.find(" * kw_recip("), std::string::npos) << "no multiplication by the reciprocal in the CUDA source";
}

// A task kwiki writes no V0 for: the user's CUDA kernel against the launcher kwiki wrote, and the
// user's Python Model through the same harness. The RoPE variant is one the generator lowers, so the
// plan is told to try only rms_norm, which cannot prove it: what is left is kwiki's generic launcher.
class UserCandidate : public ::testing::Test {
 protected:
  void SetUp() override {
    if (torch_version().first == 0) GTEST_SKIP() << KWIKI_TEST_PYTHON << " has no torch (scripts/dev.sh installs python3-torch)";
    task_ = std::string(KWIKI_SOURCE_DIR) + "/tests/data/rope_user_kernel";
    ws_ = dir_ / "ws";
    const RunResult plan = run_kwiki({"plan", "--task", task_, "--gpu", "H200", "--pattern", "rms_norm", "--workspace", ws_, "--index", TaskEnv::index(), "--json"});
    ASSERT_EQ(plan.exit_code, 0) << plan.err;
    ASSERT_EQ(json::parse(plan.out)["pattern"]["name"], "unknown");
    // No family: kwiki writes the launcher signature it derived from the trace, and builds nothing.
    const RunResult none = run_kwiki({"baseline", "--workspace", ws_, "--no-commit"});
    ASSERT_EQ(none.exit_code, 2) << none.out;
    abi_ = test::read_text(ws_ + "/kernel_abi.h");
  }
  TempDir dir_;
  std::string task_, ws_, abi_;
};

TEST_F(UserCandidate, CudaKernelAgainstTheWrittenLauncherCompilesForSm90a) {
  EXPECT_NE(abi_.find("tensors[0] = x (input, bf16) [dims[0], dims[1], dims[2]]"), std::string::npos) << abi_;
  EXPECT_NE(abi_.find("tensors[1] = positions (input, int64) [dims[3]]"), std::string::npos) << abi_;
  EXPECT_NE(abi_.find("tensors[2] = inv_freq (parameter, fp32)"), std::string::npos) << abi_;
  EXPECT_NE(abi_.find("tensors[3] = out (output: write it, bf16)"), std::string::npos) << abi_;
  if (!have("nvcc") && !fs::exists("/usr/local/cuda/bin/nvcc"))
    GTEST_SKIP() << "no nvcc here: the kernel cannot be compiled (the CUDA toolkit is outside Debian main)";
  const RunResult r = run_kwiki({"baseline", "--workspace", ws_, "--kernel", task_ + "/user_kernel.cu", "--no-commit", "--json"});
  const json j = json::parse(r.out);
  ASSERT_TRUE(j["compiled"].get<bool>()) << r.out << test::read_text(ws_ + "/profiles/v0/build.log");
  EXPECT_EQ(j["static_evidence"]["target"], "sm_90a");
  if (std::system("nvidia-smi -L > /dev/null 2>&1") == 0) {
    EXPECT_EQ(r.exit_code, 0) << r.out << test::read_text(ws_ + "/profiles/v0/test_kernel.log");
    EXPECT_EQ(j["status"], "PASS");
  } else {
    EXPECT_EQ(r.exit_code, 5) << r.out;  // built, not measured: no GPU here
  }
}

TEST_F(UserCandidate, PythonModelIsCheckedAgainstTheReferenceOnTheCpu) {
  const RunResult r = run_kwiki({"baseline", "--workspace", ws_, "--kernel", task_ + "/user_model.py", "--device", "cpu", "--no-commit", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << test::read_text(ws_ + "/profiles/v0/test_kernel.log");
  EXPECT_EQ(json::parse(r.out)["status"], "PASS");
  // A wrong Model fails the same harness.
  test::write_text(dir_ / "wrong.py", test::read_text(task_ + "/user_model.py") + "\n_forward = Model.forward\nModel.forward = lambda self, x, positions: _forward(self, x, positions) * 1.5\n");
  const RunResult wrong = run_kwiki({"baseline", "--workspace", ws_, "--kernel", dir_ / "wrong.py", "--device", "cpu", "--no-commit", "--json"});
  EXPECT_EQ(wrong.exit_code, 1) << wrong.out;
  EXPECT_EQ(json::parse(wrong.out)["status"], "MISMATCH");
}

}  // namespace
}  // namespace kwiki
