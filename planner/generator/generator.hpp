// The generator family: lower every traced call of a task to one kernel IR, fit its sizes, build
// its CPU twin from the IR and prove it against the reference's recorded outputs.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernel_ir.hpp"
#include "lower.hpp"
#include "trace.hpp"

namespace kwiki::gen {

/// How the generator fared on one task.
struct Generation {
  bool lowered = false;     ///< one IR serves every traced call
  std::string op;           ///< the reference op that stopped the lowering ("" when lowered, or not one op)
  std::string why;          ///< why it was not lowered, or why the proof failed / did not run
  Kernel kernel;            ///< the fitted IR (lowered)
  bool proof_ran = false;   ///< the CPU twin was built and run on the traced inputs
  bool proven = false;      ///< it matched the reference on every traced shape
  double worst_abs = 0;     ///< the largest absolute error over all outputs and shapes
  nlohmann::ordered_json shapes = nlohmann::ordered_json::object();  ///< per shape: per output ok / max_abs / message
  /// The binding kernel.py reads: buffers, size expressions, floats and results.
  nlohmann::ordered_json launch_recipe() const;
};

/// Lowers and proves. `shapes` gives each shape's init_kwargs (the given sizes' arguments).
Generation generate_from_trace(const detail::Trace& trace, const std::vector<ShapeCase>& shapes);

/// The kernel's samples as the lowering reads them, from one traced shape (small run and, when
/// recorded, the given sizes' run). Exposed for tests.
std::vector<GraphSample> samples_of(const detail::ShapeTrace& s, const nlohmann::json& real_init_kwargs);

}  // namespace kwiki::gen
