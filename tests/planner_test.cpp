// Tests of the planner: roofline arithmetic by hand, pattern detection, task errors, plan CLI.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "kwiki/error.hpp"
#include "kwiki/planner.hpp"
#include "generator/kernel_ir.hpp"
#include "row_reduction.hpp"
#include "test_support.hpp"

namespace kwiki {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::RunResult;
using test::TempDir;
using test::run_kwiki;

ShapeCase shape_of(std::map<std::string, double> dims, json init = json::object()) {
  ShapeCase s;
  s.id = "s";
  s.dims = std::move(dims);
  s.init_kwargs = std::move(init);
  return s;
}

Ceilings h200_like() {
  Ceilings c;
  c.bandwidth_tb_s = {4.8, "TB/s", "x:memory.bandwidth_tb_s", true};
  c.matrix_peak_tflops = {989.5, "TFLOPS", "x:peak_compute.bf16.dense", true};
  c.vector_peak_tflops = {67, "TFLOPS", "x:peak_compute.fp32.cuda-core.dense", true};
  c.launch_floor_us = {4.8, "us", "y:facts.value", true};
  return c;
}

TEST(Roofline, RmsNormBytesExactAndSolWithinOnePercent) {
  // 4205 x 5120 bf16: x and out are 4205*5120*2 bytes each, weight 5120*2.
  const auto w = count_work("rms_norm", shape_of({{"num_tokens", 4205}, {"hidden_size", 5120}}), "bf16");
  ASSERT_TRUE(w);
  EXPECT_DOUBLE_EQ(w->bytes_read, 4205.0 * 5120 * 2 + 5120 * 2);
  EXPECT_DOUBLE_EQ(w->bytes_written, 4205.0 * 5120 * 2);
  EXPECT_DOUBLE_EQ(w->matrix_flops, 0);
  EXPECT_DOUBLE_EQ(w->vector_flops, 4.0 * 4205 * 5120 + 4205);
  const Roofline r = evaluate_roofline(*w, h200_like());
  const double bytes = 2.0 * 4205 * 5120 * 2 + 5120 * 2;  // 86,128,640
  const double expected_us = bytes / 4.8e12 * 1e6;        // 17.94 us
  EXPECT_NEAR(r.sol_us, expected_us, expected_us * 0.01);
  EXPECT_EQ(r.bound, "memory");
  EXPECT_NEAR(r.ridge, 67.0 / 4.8, 1e-9);  // vector work: fp32 peak over bandwidth
}

TEST(Roofline, FusedAddRmsNormMovesFourRowsPerToken) {
  const auto w = count_work("fused_add_rms_norm", shape_of({{"num_tokens", 4205}, {"hidden_size", 5120}}), "bf16");
  ASSERT_TRUE(w);
  EXPECT_DOUBLE_EQ(w->bytes_read + w->bytes_written, 4.0 * 4205 * 5120 * 2 + 5120 * 2);  // 172.2 MB
  const Roofline r = evaluate_roofline(*w, h200_like());
  EXPECT_NEAR(r.sol_us, 172226560.0 / 4.8e12 * 1e6, 0.36);  // 35.88 us (+-1%)
}

TEST(Roofline, GemmIsMatrixWorkAndComputeBound) {
  const auto w = count_work("gemm", shape_of({{"num_tokens", 4096}, {"in_features", 4096}, {"out_features", 4096}}), "bf16");
  ASSERT_TRUE(w);
  EXPECT_DOUBLE_EQ(w->matrix_flops, 2.0 * 4096 * 4096 * 4096);
  EXPECT_DOUBLE_EQ(w->vector_flops, 0);
  EXPECT_DOUBLE_EQ(w->bytes_read, 2.0 * 4096 * 4096 * 2);
  EXPECT_DOUBLE_EQ(w->bytes_written, 4096.0 * 4096 * 2);
  const Roofline r = evaluate_roofline(*w, h200_like());
  const double expected = 2.0 * 4096 * 4096 * 4096 / 989.5e12 * 1e6;  // 138.9 us
  EXPECT_NEAR(r.sol_us, expected, expected * 0.01);
  EXPECT_EQ(r.bound, "compute");
  EXPECT_NEAR(r.ridge, 989.5 / 4.8, 1e-9);
}

TEST(Roofline, GemmBiasAddsVectorWorkAndBytes) {
  const auto w = count_work("gemm", shape_of({{"num_tokens", 16}, {"in_features", 1024}, {"out_features", 512}}, {{"bias", true}}), "bf16");
  ASSERT_TRUE(w);
  EXPECT_DOUBLE_EQ(w->vector_flops, 16.0 * 512);
  EXPECT_DOUBLE_EQ(w->bytes_read, (16.0 * 1024 + 512.0 * 1024 + 512) * 2);
}

TEST(Roofline, SmallGemmIsMemoryBound) {
  const auto w = count_work("gemm", shape_of({{"num_tokens", 1}, {"in_features", 4096}, {"out_features", 6144}}), "bf16");
  const Roofline r = evaluate_roofline(*w, h200_like());
  EXPECT_EQ(r.bound, "memory");
  EXPECT_NEAR(r.memory_us, (4096.0 + 6144.0 * 4096 + 6144) * 2 / 4.8e12 * 1e6, 1e-6);
}

TEST(Roofline, DecodeAttentionReadsEachKvHeadOnce) {
  const auto w = count_work("paged_decode_attention",
                            shape_of({{"num_seqs", 1}, {"num_q_heads", 32}, {"num_kv_heads", 8}, {"head_size", 128}, {"context_len", 32768}, {"block_size", 16}}),
                            "bf16");
  ASSERT_TRUE(w);
  const double kv = 2.0 * 1 * 8 * 32768 * 128 * 2;  // K and V, 8 KV heads, not 32
  EXPECT_DOUBLE_EQ(w->bytes_read, 32.0 * 128 * 2 + kv + 2048.0 * 4 + 4);
  EXPECT_DOUBLE_EQ(w->matrix_flops, 4.0 * 32 * 32768 * 128);
  EXPECT_EQ(evaluate_roofline(*w, h200_like()).bound, "memory");
}

TEST(Roofline, MatrixAndVectorTimesAdd) {
  WorkCounts w;
  w.matrix_flops = 989.5e12 * 1e-6;  // 1 us on the matrix peak
  w.vector_flops = 67e12 * 2e-6;     // 2 us on the vector peak
  w.bytes_read = 4.8e12 * 1e-6;      // 1 us of bandwidth
  const Roofline r = evaluate_roofline(w, h200_like());
  EXPECT_NEAR(r.compute_us, 3.0, 1e-9);
  EXPECT_NEAR(r.memory_us, 1.0, 1e-9);
  EXPECT_NEAR(r.sol_us, 3.0, 1e-9);
}

TEST(Roofline, LaunchFloorBoundsTinyShapes) {
  const auto w = count_work("rms_norm", shape_of({{"num_tokens", 1}, {"hidden_size", 4096}}), "bf16");
  const Roofline r = evaluate_roofline(*w, h200_like());
  EXPECT_LT(r.sol_us, 0.01);
  EXPECT_DOUBLE_EQ(r.floor_us, 4.8);
  EXPECT_DOUBLE_EQ(r.attainable_us, 4.8);
  EXPECT_EQ(r.bound, "latency");
  Ceilings no_floor = h200_like();
  no_floor.launch_floor_us.present = false;
  EXPECT_DOUBLE_EQ(evaluate_roofline(*w, no_floor).attainable_us, r.sol_us);
}

TEST(Roofline, Fp8QuantWritesOneBytePerElementPlusScales) {
  const auto w = count_work("fp8_quant", shape_of({{"num_tokens", 2048}, {"hidden_size", 7168}}), "bf16");
  ASSERT_TRUE(w);
  EXPECT_DOUBLE_EQ(w->bytes_read, 2048.0 * 7168 * 2);
  EXPECT_DOUBLE_EQ(w->bytes_written, 2048.0 * 7168 + 2048 * 4);
}

TEST(Roofline, SiluAndMulAndSoftmaxAndMoe) {
  const auto silu = count_work("gelu_and_mul", shape_of({{"num_tokens", 4}, {"intermediate_size", 100}}), "bf16");
  EXPECT_DOUBLE_EQ(silu->bytes_read, 2.0 * 4 * 100 * 2);
  EXPECT_DOUBLE_EQ(silu->bytes_written, 4.0 * 100 * 2);
  const auto softmax = count_work("softmax", shape_of({{"num_tokens", 3}, {"hidden_size", 10}}), "fp32");
  EXPECT_DOUBLE_EQ(softmax->bytes_read + softmax->bytes_written, 2.0 * 3 * 10 * 4);
  EXPECT_DOUBLE_EQ(softmax->vector_flops, 5.0 * 30);
  const auto moe = count_work("moe_gating", shape_of({{"num_tokens", 10}, {"num_experts", 64}, {"topk", 2}}), "fp32");
  EXPECT_DOUBLE_EQ(moe->bytes_read, 10.0 * 64 * 4);
  EXPECT_DOUBLE_EQ(moe->bytes_written, 10.0 * 2 * 8);
}

TEST(Roofline, RowReduceReadsTheRowsAndWritesOneElementEach) {
  const auto w = count_work("row_reduce", shape_of({{"num_tokens", 8192}, {"hidden_size", 8192}}), "bf16");
  ASSERT_TRUE(w);
  EXPECT_DOUBLE_EQ(w->bytes_read, 8192.0 * 8192 * 2);
  EXPECT_DOUBLE_EQ(w->bytes_written, 8192.0 * 2);
  EXPECT_EQ(evaluate_roofline(*w, h200_like()).bound, "memory");
}

TEST(Roofline, UnknownPatternOrMissingSizesCountNothing) {
  EXPECT_FALSE(count_work("scan", shape_of({{"num_tokens", 4}}), "bf16"));
  EXPECT_FALSE(count_work("rms_norm", shape_of({{"num_tokens", 4}}), "bf16"));
}

TEST(Roofline, DryRunTensorsOverrideFormulaBytes) {
  ShapeCase s = shape_of({{"num_tokens", 2}, {"hidden_size", 8}});
  s.inputs = {{"x", {2, 8}, "bf16", false, ""}, {"residual", {2, 8}, "bf16", true, ""}, {"weight", {8}, "bf16", false, ""}};
  s.outputs = {{"out", {2, 8}, "bf16", false, ""}, {"residual", {2, 8}, "bf16", false, "residual"}};
  const auto w = count_work("fused_add_rms_norm", s, "bf16");
  EXPECT_DOUBLE_EQ(w->bytes_read, (16 + 16 + 8) * 2);
  EXPECT_DOUBLE_EQ(w->bytes_written, (16 + 16) * 2);  // residual written back once (its returned alias not again), out written
}

// ---- pattern detection and task files ----

std::string task_dir(const TempDir& dir, const std::string& reference, const std::string& shapes = R"({"s1": {"init_kwargs": {}, "input_kwargs": {"num_tokens": 4, "hidden_size": 64}}})",
                     const std::string& factory = "import torch\ndef _make_inputs(num_tokens, hidden_size, device='cuda', seed=0):\n    return {}\n") {
  const std::string path = dir / "task";
  test::write_text(path + "/reference.py", reference);
  test::write_text(path + "/input.py", factory);
  test::write_text(path + "/shapes.json", shapes);
  return path;
}

TEST(Pattern, DetectsFromPyTorchCalls) {
  TempDir dir;
  struct Case {
    const char* source;
    const char* pattern;
  } cases[] = {
      {"class Model:\n  def forward(self, x):\n    v = x.float().pow(2).mean(-1, keepdim=True)\n    return x * torch.rsqrt(v + 1e-6)\n", "rms_norm"},
      {"class Model:\n  def forward(self, x, residual):\n    residual.add_(x)\n    return F.rms_norm(residual, (4096,))\n", "fused_add_rms_norm"},
      {"class Model:\n  def forward(self, x):\n    return F.layer_norm(x, x.shape[-1:])\n", "layer_norm"},
      {"class Model:\n  def forward(self, x):\n    return torch.softmax(x.float(), dim=-1)\n", "softmax"},
      {"class Model:\n  def forward(self, x):\n    d = x.shape[-1] // 2\n    return F.silu(x[..., :d]) * x[..., d:]\n", "silu_and_mul"},
      {"class Model:\n  def forward(self, x):\n    return F.linear(x, self.w)\n", "gemm"},
      {"class Model:\n  def forward(self, g):\n    p = torch.softmax(g, -1)\n    w, i = torch.topk(p, 2)\n    return w, i\n", "moe_gating"},
      {"class Model:\n  def forward(self, x):\n    s = x.abs().amax(-1) / 448\n    return (x / s).to(torch.float8_e4m3fn)\n", "fp8_quant"},
  };
  for (const auto& c : cases) {
    Task task;
    task.reference = task_dir(dir, c.source);
    task.reference += "/reference.py";
    const PatternGuess g = detect_pattern(task);
    EXPECT_EQ(g.name, c.pattern) << c.source;
    EXPECT_GT(g.confidence, 0.5) << c.source;
    EXPECT_FALSE(g.evidence.empty());
  }
}

TEST(Pattern, RowReductionsOfAnInputAreRowReduceWithTheirOp) {
  TempDir dir;
  struct Case {
    const char* forward;
    const char* op;
    bool keepdim;
  } cases[] = {
      {"return x.sum(dim=-1)", "sum", false},
      {"return torch.sum(x, -1)", "sum", false},
      {"return x.float().mean(-1, keepdim=True).to(x.dtype)", "mean", true},
      {"return torch.amax(x, dim=-1)", "max", false},
      {"return x.max(dim=-1).values", "max", false},
      {"return torch.max(x, -1)[0]", "max", false},
  };
  for (const auto& c : cases) {
    Task task;
    task.reference = task_dir(dir, std::string("class Model:\n  def forward(self, x):\n    ") + c.forward + "\n") + "/reference.py";
    const PatternGuess g = detect_pattern(task);
    EXPECT_EQ(g.name, "row_reduce") << c.forward;
    EXPECT_GT(g.confidence, 0.5) << c.forward;
    const auto r = detail::detect_row_reduction(task);
    ASSERT_TRUE(r) << c.forward;
    EXPECT_EQ(r->op, c.op) << c.forward;
    EXPECT_EQ(r->keepdim, c.keepdim) << c.forward;
  }
}

TEST(Pattern, ReductionsTheTemplateWouldGetWrongAreNotRowReduce) {
  TempDir dir;
  const char* forwards[] = {
      "return x.float().sum(dim=-1)",                      // fp32 result: the template stores the input's dtype
      "return x.sum(-1) + x.amax(-1)",                     // two kinds of reduction
      "return x.max(dim=-1)",                              // values and indices
      "return x.sum(dim=0)",                               // not the last dim
      "return (x * x).sum(-1)",                            // not a plain input
      "v = x.pow(2).mean(-1, keepdim=True)\n    return x / torch.sqrt(v)",  // a norm without rsqrt: its own evidence wins
  };
  for (const char* f : forwards) {
    Task task;
    task.reference = task_dir(dir, std::string("class Model:\n  def forward(self, x):\n    ") + f + "\n") + "/reference.py";
    EXPECT_NE(detect_pattern(task).name, "row_reduce") << f;
  }
  // metadata.json saying the output is fp32 keeps a bf16 reduction unclaimed.
  Task task;
  task.reference = task_dir(dir, "class Model:\n  def forward(self, x):\n    return x.sum(-1)\n") + "/reference.py";
  task.metadata = {{"output_dtypes", {{"y", "fp32"}}}};
  EXPECT_NE(detect_pattern(task).name, "row_reduce");
}

// kwiki's own nine sample tasks: those whose metadata.json names the pattern they were written for
// (data/tasks also holds tasks written as users write them, checked by tests/tasks_test.cpp).
std::vector<fs::path> sample_tasks() {
  std::vector<fs::path> out;
  for (const auto& entry : fs::directory_iterator(std::string(KWIKI_SOURCE_DIR) + "/data/tasks")) {
    const std::string meta = test::read_text((entry.path() / "metadata.json").string());
    if (entry.is_directory() && meta.find("\"pattern\"") != std::string::npos) out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Pattern, SampleTasksKeepTheirPatternAndTheReductionTaskIsRowReduce) {
  int tasks = 0;
  for (const auto& path : sample_tasks()) {
    const fs::directory_entry entry(path);
    Task task = load_task(entry.path().string());
    EXPECT_EQ(detect_pattern(task).name, task.metadata["pattern"].get<std::string>()) << entry.path();
    task.pattern_hint.clear();  // from the reference alone, none of them is a plain reduction
    EXPECT_NE(detect_pattern(task).name, "row_reduce") << entry.path();
    ++tasks;
  }
  EXPECT_EQ(tasks, 9);
  const Task reduction = load_task(std::string(KWIKI_SOURCE_DIR) + "/tests/data/row_reduce_task");
  const PatternGuess g = detect_pattern(reduction);
  EXPECT_EQ(g.name, "row_reduce");
  ASSERT_FALSE(g.evidence.empty());
  EXPECT_EQ(g.evidence[0], "x.sum(dim=-1)");
  const auto r = detail::detect_row_reduction(reduction);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->op, "sum");
  EXPECT_EQ(r->op_code, 0);
  EXPECT_FALSE(r->keepdim);
}

TEST(Pattern, UnknownIsSaidToBeUnknown) {
  TempDir dir;
  Task task;
  task.reference = task_dir(dir, "class Model:\n  def forward(self, x):\n    return torch.cumsum(x, 0)\n") + "/reference.py";
  EXPECT_EQ(detect_pattern(task).name, "unknown");
}

Error load_error(const std::string& path) {
  try {
    load_task(path);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected an error";
  return Error(ErrorCode::kInternal, "");
}

TEST(TaskFiles, MissingFileIsNamed) {
  TempDir dir;
  const std::string path = task_dir(dir, "class Model: pass\n");
  fs::remove(path + "/input.py");
  const Error e = load_error(path);
  EXPECT_NE(e.file().find("input.py"), std::string::npos);
  EXPECT_EQ(exit_code_for(e.code()), 2);
}

TEST(TaskFiles, BadJsonIsNamed) {
  TempDir dir;
  const std::string path = task_dir(dir, "class Model: pass\n", "{\"s1\": ");
  const Error e = load_error(path);
  EXPECT_EQ(e.code(), ErrorCode::kInvalidJson);
  EXPECT_NE(e.file().find("shapes.json"), std::string::npos);
}

TEST(TaskFiles, ShapeNotMatchingTheFactoryNamesTheShape) {
  TempDir dir;
  const std::string path = task_dir(dir, "class Model: pass\n", R"({"big": {"input_kwargs": {"num_tokens": 4, "hidden": 64}}})");
  const Error e = load_error(path);
  EXPECT_NE(std::string(e.what()).find("\"big\""), std::string::npos);
  EXPECT_EQ(e.pointer(), "/big/input_kwargs/hidden");
}

TEST(TaskFiles, ReferenceWithoutModelIsRefused) {
  TempDir dir;
  const Error e = load_error(task_dir(dir, "def forward(x): return x\n"));
  EXPECT_NE(e.file().find("reference.py"), std::string::npos);
}

TEST(TaskFiles, TaskJsonShapesAndErrors) {
  TempDir dir;
  test::write_text(dir / "t/task.json", R"({"name": "rms", "pattern": "rms_norm", "dtype": "bf16", "params": {"eps": 1e-6},
    "shapes": {"decode": {"tokens": 1, "hidden": 4096}, "prefill": {"tokens": 8192, "hidden": 4096}}})");
  const Task task = load_task(dir / "t/task.json");
  ASSERT_EQ(task.shapes.size(), 2u);
  EXPECT_EQ(task.shapes[0].id, "decode");
  EXPECT_DOUBLE_EQ(task.shapes[0].dims.at("hidden_size"), 4096);
  test::write_text(dir / "u/task.json", R"({"dtype": "bf17", "shapes": {"a": {"tokens": 1}}})");
  EXPECT_EQ(load_error(dir / "u/task.json").pointer(), "/dtype");
  test::write_text(dir / "v/task.json", R"({"shapes": {}})");
  EXPECT_EQ(load_error(dir / "v/task.json").pointer(), "/shapes");
}

// ---- the plan CLI ----

class PlanCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    ASSERT_EQ(run_kwiki({"index", "--wiki", test::bundled_wiki(), "--index", index()}).exit_code, 0);
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string index() { return (*dir_) / "index"; }
  static std::string tasks() { return std::string(KWIKI_SOURCE_DIR) + "/data/tasks"; }
  static TempDir* dir_;
};
TempDir* PlanCli::dir_ = nullptr;

TEST_F(PlanCli, EverySampleTaskPlansForH200AndMI300XWithResolvableCitations) {
  for (const auto& path : sample_tasks()) {
    const fs::directory_entry entry(path);
    for (const char* gpu : {"H200", "MI300X"}) {
      const std::string ws = (*dir_) / ("ws-" + entry.path().filename().string() + "-" + gpu);
      const RunResult r = run_kwiki({"plan", "--task", entry.path().string(), "--gpu", gpu, "--workspace", ws, "--index", index(), "--json"});
      ASSERT_EQ(r.exit_code, 0) << entry.path() << " " << gpu << "\n" << r.out << r.err;
      ASSERT_TRUE(fs::exists(ws + "/README.md") && fs::exists(ws + "/plans/v0_plan.md") && fs::exists(ws + "/plans/v0_plan.json") &&
                  fs::exists(ws + "/.git") && fs::exists(ws + "/task"));
      // Every record id cited in README.md and the plan resolves with `kwiki get`.
      const json plan = json::parse(test::read_text(ws + "/plans/v0_plan.json"));
      std::set<std::string> ids;
      for (const auto& f : plan["hardware_facts"])
        if (f["citation"] != "not recorded") ids.insert(f["citation"].get<std::string>().substr(0, f["citation"].get<std::string>().find(':')));
      for (const auto& c : plan["records_consulted"]) ids.insert(c["record"]);
      for (const auto& c : plan["design"]["choices"])
        if (c["record"] != "(no record found)") ids.insert(c["record"]);
      std::vector<std::string> args = {"get"};
      args.insert(args.end(), ids.begin(), ids.end());
      args.insert(args.end(), {"--index", index(), "--json"});
      const RunResult g = run_kwiki(args);
      ASSERT_EQ(g.exit_code, 0);
      const json got = json::parse(g.out);
      for (const auto& id : ids) EXPECT_TRUE(got["records"].contains(id)) << id << " cited but unknown";
      EXPECT_TRUE(got["notes"].empty()) << got["notes"];
      EXPECT_NE(test::read_text(ws + "/README.md").find("<- "), std::string::npos);
    }
  }
}

TEST_F(PlanCli, UnknownProductExitsThreeAndNamesRecorded) {
  const RunResult r = run_kwiki({"plan", "--task", tasks() + "/rms_norm", "--gpu", "RTX 4090", "--workspace", (*dir_) / "never", "--index", index()});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.out.find("Recorded products"), std::string::npos);
  EXPECT_FALSE(fs::exists((*dir_) / "never"));
}

TEST_F(PlanCli, UnknownPatternStillPlansWithGivenCounts) {
  const std::string task = (*dir_) / "cumsum";
  test::write_text(task + "/reference.py", "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.cumsum(x, dim=-1)\n");
  test::write_text(task + "/input.py", "import torch\ndef _make_inputs(num_tokens, hidden_size, device='cuda', seed=0):\n    return {'x': torch.randn(num_tokens, hidden_size, device=device)}\n");
  test::write_text(task + "/shapes.json", R"({"t8_h4096": {"input_kwargs": {"num_tokens": 8, "hidden_size": 4096}}})");
  test::write_text(task + "/roofline.json", R"({"shapes": {"t8_h4096": {"semantic_W_flops": {"fp32": 32768}, "semantic_Q_read_bytes": 131072, "semantic_Q_write_bytes": 131072}}})");
  const std::string ws = (*dir_) / "ws-cumsum";
  const RunResult r = run_kwiki({"plan", "--task", task, "--gpu", "H200", "--workspace", ws, "--index", index(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json plan = json::parse(test::read_text(ws + "/plans/v0_plan.json"));
  EXPECT_EQ(plan["pattern"]["name"], "unknown");
  EXPECT_TRUE(plan["design"]["template"].is_null());
  EXPECT_DOUBLE_EQ(plan["shapes"][0]["work"]["bytes_read"].get<double>(), 131072);
  EXPECT_FALSE(plan["records_consulted"].empty());
  EXPECT_NE(test::read_text(ws + "/plans/v0_plan.md").find("pattern unknown"), std::string::npos);
}

TEST_F(PlanCli, BadTaskLeavesNoWorkspace) {
  const std::string task = (*dir_) / "broken";
  test::write_text(task + "/reference.py", "class Model: pass\n");
  test::write_text(task + "/input.py", "def _make_inputs(n):\n    return {}\n");
  test::write_text(task + "/shapes.json", R"({"a": {"input_kwargs": {"m": 1}}})");
  const RunResult r = run_kwiki({"plan", "--task", task, "--gpu", "H200", "--workspace", (*dir_) / "ws-broken", "--index", index()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("shapes.json"), std::string::npos);
  EXPECT_FALSE(fs::exists((*dir_) / "ws-broken"));
  for (const auto& e : fs::directory_iterator(dir_->path())) EXPECT_EQ(e.path().string().find("kwiki-staging"), std::string::npos);
}

TEST_F(PlanCli, ExistingWorkspaceNeedsForce) {
  const std::string ws = (*dir_) / "ws-exists";
  test::write_text(ws + "/keep.txt", "mine");
  const RunResult r = run_kwiki({"plan", "--task", tasks() + "/softmax", "--gpu", "H200", "--workspace", ws, "--index", index()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(fs::exists(ws + "/keep.txt"));
  // --force replaces a workspace kwiki made, never another folder (tests/security has the rest).
  EXPECT_EQ(run_kwiki({"plan", "--task", tasks() + "/softmax", "--gpu", "H200", "--workspace", ws, "--force", "--index", index()}).exit_code, 2);
  EXPECT_TRUE(fs::exists(ws + "/keep.txt"));
  const std::string made = (*dir_) / "ws-made";
  ASSERT_EQ(run_kwiki({"plan", "--task", tasks() + "/softmax", "--gpu", "H200", "--workspace", made, "--index", index()}).exit_code, 0);
  test::write_text(made + "/keep.txt", "mine");
  EXPECT_EQ(run_kwiki({"plan", "--task", tasks() + "/softmax", "--gpu", "H200", "--workspace", made, "--force", "--index", index()}).exit_code, 0);
  EXPECT_FALSE(fs::exists(made + "/keep.txt"));
}

TEST_F(PlanCli, PlanSaysWhereTheDryRunWasSkipped) {
  const std::string ws = (*dir_) / "ws-nodry";
  const RunResult r = run_kwiki({"plan", "--task", tasks() + "/rms_norm", "--gpu", "H200", "--workspace", ws, "--no-dry-run", "--index", index(), "--json"});
  ASSERT_EQ(r.exit_code, 0);
  const json j = json::parse(r.out);
  EXPECT_NE(j["notes"].dump().find("the reference was not run (--no-dry-run)"), std::string::npos) << j["notes"];
  // Without a run there is no proof, so no family is claimed.
  EXPECT_EQ(j["pattern"]["name"], "unknown");
  EXPECT_NE(j["notes"].dump().find("unproven"), std::string::npos);
}


// The kernel IR's gathers: a load scaled by an index operand survives the JSON round trip, and a
// gather without its stride slot, an index on a store, or a second factor without its dims is refused.
TEST(KernelIr, GatherAndTwoTensorSizesRoundTripAndMalformedOnesAreRefused) {
  const nlohmann::json ir = nlohmann::json::parse(R"({
    "schema": "kwiki-kernel-ir-1", "outer": [0], "inner": 1, "sizes": [4, 64, 0, 1, 0, 0, 1, 64, 256],
    "size_exprs": [{"tensor": "ids", "dims": [0, 1], "num": 1, "den": 1}, {"tensor": "param:w", "dims": [-1, 0], "num": 1, "den": 1},
                   {"const": 0}, {"const": 1}, {"const": 0}, {"const": 0}, {"const": 1},
                   {"tensor": "param:w", "dims": [-1, 0], "num": 1, "den": 1},
                   {"tensor": "ids", "dims": [0, 1], "num": 1, "den": 1, "tensor2": "param:w", "dims2": [-1, 0]}],
    "floats": [],
    "buffers": [{"name": "out:out", "role": "output", "dtype": "bf16", "shape": [0, 1]},
                {"name": "ids", "role": "input", "dtype": "int64", "shape": [0]},
                {"name": "param:w", "role": "param", "dtype": "bf16", "shape": [8, 1]}],
    "nodes": [{"op": "load", "dtype": "int64", "level": "row", "args": [], "access": {"buffer": 1, "base": 2, "outer": [3], "inner": 4}},
              {"op": "load", "dtype": "bf16", "level": "elem", "args": [0], "access": {"buffer": 2, "base": 5, "outer": [2], "inner": 6, "index": 7}}],
    "stores": [{"node": 1, "access": {"buffer": 0, "base": 2, "outer": [7], "inner": 6}}],
    "results": [{"name": "out", "buffer": 0}]})");
  const gen::Kernel k = gen::Kernel::from_json(ir);
  ASSERT_EQ(k.nodes[1].access.index, 7);
  EXPECT_EQ(k.size_exprs[8].tensor2, "param:w");
  EXPECT_EQ(k.size_exprs[8].describe(), "ids.shape[0:1]*param:w.shape[-1:0]");
  const gen::Kernel again = gen::Kernel::from_json(nlohmann::json::parse(k.to_json().dump()));
  EXPECT_EQ(again.to_json().dump(), k.to_json().dump());
  nlohmann::json no_slot = ir;
  no_slot["nodes"][1]["access"].erase("index");
  EXPECT_THROW(gen::Kernel::from_json(no_slot), std::runtime_error);  // an operand on a plain load
  nlohmann::json bad_slot = ir;
  bad_slot["nodes"][1]["access"]["index"] = 99;
  EXPECT_THROW(gen::Kernel::from_json(bad_slot), std::runtime_error);
  nlohmann::json store_index = ir;
  store_index["stores"][0]["access"]["index"] = 7;
  EXPECT_THROW(gen::Kernel::from_json(store_index), std::runtime_error);
  nlohmann::json half = ir;
  half["size_exprs"][8].erase("dims2");
  EXPECT_THROW(gen::Kernel::from_json(half), std::runtime_error);
}

}  // namespace
}  // namespace kwiki
