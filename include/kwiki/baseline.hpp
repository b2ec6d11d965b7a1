// Public API of kwiki baseline: write, build, check and measure the V0 kernel of a workspace.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kwiki {

/// Exit statuses of `kwiki baseline` beyond the common ones (0 measured and correct, 1 ran but
/// incorrect, 2 usage/input, 4 build or runtime failure).
inline constexpr int kExitNotMeasured = 5;  ///< generated and compiled; no suitable device to run on

/// What `kwiki baseline` was asked to do.
struct BaselineRequest {
  std::string workspace;
  std::string kernel_file;            ///< --kernel: a CUDA/HIP file (kernel_abi.h's launcher) or a Python Model (.py)
  std::string device = "gpu";         ///< gpu, or cpu: the family's CPU twin through the harness (correctness only)
  std::vector<std::string> shape_ids; ///< --shapes (all when empty)
  bool allow_other_device = false;    ///< run on a GPU other than the plan's product, labelling figures
  int timeout_sec = 30;               ///< per case (TEST_TIMEOUT_SEC)
  bool timing = true;                 ///< false: correctness only (--no-timing), e.g. many baselines sharing one GPU
  bool commit = true;                 ///< commit "V0: baseline kernel" in the workspace
  /// Called as each stage starts: `step` of `steps` (1-based) and what it does. Optional; called
  /// on the caller's thread.
  std::function<void(int step, int steps, const std::string& stage)> progress;
};

/// What it did.
struct BaselineResult {
  int exit_code = 0;
  bool compiled = false;
  bool measured = false;
  std::string status;                 ///< PASS, MISMATCH, ..., NOT_RUN
  std::string kernel_path;            ///< kernel.cu / kernel.hip
  std::string not_measured_because;
  nlohmann::ordered_json static_evidence;  ///< instruction counts from the listing, resources
  nlohmann::ordered_json result_json;      ///< the harness's RESULT_JSON when it ran
  std::vector<std::string> notes;
};

/// Stages: reads the workspace's plan; generates the candidate (the proven family's template, or
/// the user's --kernel) with kernel.py, test_kernel.py and kernel_abi.h, never over a file the user
/// changed; builds it (cached by source, flags and target; the CPU twin for --device cpu); runs
/// the harness where it can run; writes baseline_report.md and memory/v0.json; commits. Throws
/// kwiki::Error for a workspace without a plan (kBadInput), and for a task with no proven family
/// and no --kernel (kBadInput, after writing kernel_abi.h for a kernel of the user's).
BaselineResult run_baseline(const BaselineRequest& request);

/// The outcome as JSON: workspace, kernel, compiled, measured, status, not_measured_because,
/// the report's path, notes, and the harness's RESULT_JSON: whole with the static evidence, or
/// with `brief` its summary (all_pass, per-shape statuses, failures, latency and speedup
/// geomeans, max errors, device), about 1 KB. Never throws.
nlohmann::ordered_json baseline_result_json(const BaselineRequest& request, const BaselineResult& result, bool brief);

/// The V0 source of a template for an element type and vendor, standalone (compat inlined).
/// Empty when kwiki has no template for the pattern.
std::string template_source(const std::string& pattern, const std::string& dtype, const std::string& vendor);

/// Patterns with a template.
std::vector<std::string> template_patterns();

}  // namespace kwiki
