// The stages of kwiki baseline (generate, build, run, report, commit) and the context they share.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kwiki/baseline.hpp"
#include "subprocess.hpp"

namespace kwiki::detail {

namespace fs = std::filesystem;
using ordered_json = nlohmann::ordered_json;
using Args = std::vector<std::string>;

/// The fields of a plan that reach file names, generated sources and compiler arguments, each
/// checked against what kwiki writes.
struct PlanHeader {
  std::string pattern, vendor, product, target, dtype;
  std::string framework;  ///< cuda | hip | cutedsl | flydsl (a kFrameworks row of the plan's vendor)
};

/// What is measured: kwiki's V0 from the family's template, the user's GPU kernel, or the
/// user's Python Model.
enum class Candidate { kTemplate, kUserGpu, kUserPython };

/// Everything the stages read and write, in stage order.
struct Context {
  explicit Context(const BaselineRequest& r) : request(r) {}
  const BaselineRequest& request;
  // read_workspace
  fs::path ws, plan_path, profiles;
  ordered_json plan, graph;   ///< plans/v0_plan.json, plans/graph.json
  PlanHeader header;
  bool amd = false;
  bool cpu = false;           ///< --device cpu: the CPU twin through the harness, correctness only
  bool dsl = false;           ///< the plan's framework is a Python DSL (cutedsl, flydsl): kernel.py holds the kernel
  std::string family;         ///< the plan's proven family, or "" (none)
  std::string cpu_source;     ///< the generator's CPU kernel (family "generated"), built for --device cpu
  // generate
  Candidate candidate = Candidate::kTemplate;
  ordered_json binding;       ///< the family's binding, or kwiki's generic ABI for a user kernel
  fs::path kernel_path;       ///< the GPU source to build
  std::string source;
  fs::path python_model;      ///< the Python Model the harness checks (kernel.py, or the user's)
  // build
  std::string skip_compile;   ///< why nothing was built (a toolchain is missing)
  ordered_json evidence;
  // run
  std::string device_label;
  BaselineResult result;
};

/// A compiler or tool: argument vector, stdout and stderr together, killed at the deadline.
ProcessResult run_tool(const Args& argv, double timeout_seconds = 600, const std::string& stdin_text = {});
/// a followed by b.
Args concat(Args a, const Args& b);
/// The whole file ("" when it cannot be read) / the file written, its folders made.
std::string read_text(const fs::path& p);
void write_text(const fs::path& p, const std::string& text);
/// kwiki's cache folder ($XDG_CACHE_HOME/kwiki, else ~/.cache/kwiki).
fs::path cache_folder();

/// Builds the candidate: the GPU source with nvcc / clang (cached by source, flags and compiler)
/// plus its static evidence, or the CPU twin library for --device cpu. Sets result.compiled.
void build_stage(Context& c);

/// The DSL kernel.py compiled for the plan's target without running it (`python kernel.py
/// --compile-check`, with $KWIKI_DSL_PYTHON or the harness's python): sets result.compiled and the
/// evidence; an absent DSL wheel is "not compiled" (skip_compile), a failed compile COMPILE_FAIL.
void build_dsl(Context& c);

/// A GPU source with kwiki's headers it includes (kwiki_compat.cuh, a template another builds on) inlined, each once: one
/// self-contained file.
std::string inline_compat(const std::string& source);

/// Writes baseline_report.md and memory/v0.json from the plan and the harness's result.
void report_stage(Context& c);

}  // namespace kwiki::detail
