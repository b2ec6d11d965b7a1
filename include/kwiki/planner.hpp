// Public API of kwiki plan: a kernel task and a target GPU in, a cited V0 plan and roofline out.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kwiki {

class QueryEngine;

/// One tensor of a shape case (from the dry run, or from the pattern and the shape's sizes).
struct TensorSpec {
  std::string name;
  std::vector<long long> shape;
  std::string dtype;     ///< bf16, fp16, fp32, fp8_e4m3fn, int32, ...
  bool updated = false;  ///< an input the reference writes in place
  std::string alias_of;  ///< an output that is an input returned after an in-place update
  /// Bytes it holds (its elements times its dtype's size; 2 bytes for an unknown dtype).
  double numel_bytes() const;
};

/// One shape of a task: its id (kept as given), kwargs and the sizes read from them.
struct ShapeCase {
  std::string id;
  nlohmann::json init_kwargs = nlohmann::json::object();
  nlohmann::json input_kwargs = nlohmann::json::object();
  std::string description;
  std::map<std::string, double> dims;  ///< num_tokens, hidden_size, ... (canonical names)
  std::vector<TensorSpec> inputs, outputs;  ///< filled by the dry run when it ran
};

/// A task as read from a benchmark directory or a task.json.
struct Task {
  std::string name;
  std::string path;        ///< the task folder or task.json as given
  std::string form;        ///< "benchmark" | "task.json"
  std::string reference;   ///< reference.py path, or ""
  std::string factory;     ///< input.py path, or ""
  std::string dtype = "bf16";
  std::string pattern_hint;  ///< pattern named by the task, or ""
  nlohmann::json params = nlohmann::json::object();
  nlohmann::json metadata = nlohmann::json::object();
  nlohmann::json roofline = nlohmann::json::object();  ///< roofline.json when present
  std::vector<ShapeCase> shapes;
};

/// Reads and validates a task. Throws kwiki::Error (kBadInput/kInvalidJson with the file and a
/// JSON pointer) for missing files, bad JSON, shapes without sizes.
Task load_task(const std::string& path);

/// The compute pattern named from the reference's PyTorch calls (or the task's own word).
struct PatternGuess {
  std::string name;          ///< rms_norm, fused_add_rms_norm, ..., or "unknown"
  double confidence = 0;     ///< 0..1
  std::vector<std::string> evidence;  ///< the calls and words that decided it
};
PatternGuess detect_pattern(const Task& task);

/// Work of one shape: FLOPs by unit and bytes moved (each input read once, each output written once).
struct WorkCounts {
  double matrix_flops = 0;   ///< tensor/matrix-core work
  double vector_flops = 0;   ///< CUDA-core/vector work, special functions counted as one each
  double bytes_read = 0;
  double bytes_written = 0;
  std::string basis;         ///< how they were counted
};

/// Counts the work of a pattern for a shape's sizes; nullopt when the pattern or sizes are unknown.
std::optional<WorkCounts> count_work(const std::string& pattern, const ShapeCase& shape, const std::string& dtype);

/// A cited number: value, unit and "<record id>:<field path>".
struct CitedValue {
  double value = 0;
  std::string unit;
  std::string citation;
  bool present = false;
};

/// The ceilings a roofline divides by, each cited.
struct Ceilings {
  CitedValue bandwidth_tb_s;            ///< spec sheet HBM bandwidth
  CitedValue matrix_peak_tflops;        ///< dense matrix peak of the task dtype
  CitedValue vector_peak_tflops;        ///< fp32 vector / CUDA-core peak
  CitedValue measured_bandwidth_tb_s;   ///< measured copy ceiling, when recorded
  CitedValue measured_matrix_tflops;    ///< measured GEMM ceiling, when recorded
  CitedValue launch_floor_us;           ///< measured empty-kernel launch, when recorded
};

/// Roofline of one shape against the ceilings.
struct Roofline {
  WorkCounts work;
  double intensity = 0;  ///< FLOP per byte
  double ridge = 0;      ///< matrix (or vector) peak / bandwidth, FLOP per byte
  double compute_us = 0, memory_us = 0, sol_us = 0, floor_us = 0, attainable_us = 0;
  std::string bound;     ///< memory | compute | latency
};

/// SOL = max(matrix FLOPs / matrix peak + vector FLOPs / vector peak, bytes / bandwidth);
/// attainable = max(SOL, launch floor). Pure arithmetic; no I/O.
Roofline evaluate_roofline(const WorkCounts& work, const Ceilings& ceilings);

/// The file kwiki plan leaves at a workspace's top: `--force` replaces only a folder holding it.
inline constexpr const char* kWorkspaceMarker = ".kwiki-workspace";

/// What `kwiki plan` was asked to do.
struct PlanRequest {
  std::string task_path;
  std::string product;
  std::string workspace;             ///< default: ./kwiki-<task>-<product>
  std::string pattern_override;      ///< --pattern
  std::string framework;             ///< --framework: cuda | hip | cutedsl | flydsl; "" = the vendor's native C++ (cuda, hip)
  std::vector<std::string> shape_ids;  ///< --shapes (all when empty)
  bool force = false;                ///< replace an existing workspace
  bool dry_run = true;               ///< run the reference once per shape when torch is importable
  int dry_run_timeout_seconds = 120; ///< the dry run's process group is killed after this long (1..3600)
};

/// What it did.
struct PlanResult {
  std::string workspace;
  std::string pattern;
  std::vector<std::string> notes;
  nlohmann::ordered_json plan;  ///< plans/v0_plan.json
};

/// Plans: reads the task, resolves the product (kwiki::Error kNotRecorded, exit 3, when the wiki
/// does not record it), computes rooflines, consults the wiki through `engine`, and writes the
/// workspace atomically (a git repository; nothing is left half-written on failure).
PlanResult make_plan(const PlanRequest& request, QueryEngine& engine);

/// A plan as its callers (CLI --json, C API, MCP) return it, about 3 KB: workspace, task, the
/// family claimed (null unless proven) and pattern with its confidence, the proof's result and
/// near misses, the target, per shape its bound, SOL and attainable time in microseconds, every
/// id the plan cites (record:field for facts, record ids for the design), the notes; with
/// `with_plan` the whole plans/v0_plan.json under "v0_plan". Never throws.
nlohmann::ordered_json plan_result_json(const PlanResult& result, bool with_plan = false);

}  // namespace kwiki
