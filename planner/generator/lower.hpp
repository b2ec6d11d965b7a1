// Lowering: a recorded aten graph (one traced call) to the kernel IR, or the op that stops it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernel_ir.hpp"

namespace kwiki::gen {

/// A tensor the reference receives or holds: a forward input, or a parameter/buffer ("param:NAME").
struct NamedTensor {
  std::string name;
  std::vector<long long> shape, stride;
  std::string dtype;  ///< trace name (bf16, int64, ...)
};

/// One traced call: the ops and the tensors around them.
struct GraphSample {
  nlohmann::json ops = nlohmann::json::array();  ///< the recorded aten ops (trace_task.py's Recorder)
  std::vector<NamedTensor> tensors;              ///< inputs and parameters
  struct Output {
    std::string name;        ///< out, out0.., or a dict key
    std::string graph_name;  ///< the graph's tensor it is
    std::vector<long long> shape;
    std::string dtype;
  };
  std::vector<Output> outputs;
  std::vector<std::string> updated;              ///< inputs written in place
  std::map<std::string, nlohmann::json> scalars; ///< "input:NAME" / "init:NAME" -> a non-tensor value
  std::string label;                             ///< which call this is ("decode (traced)", ...)
};

/// The outcome of lowering: a kernel, or the reference op it cannot lower and why.
struct Lowered {
  std::optional<Kernel> kernel;
  std::string op;   ///< the aten op that stopped it ("" when the reason is not one op)
  std::string why;
};

/// Lowers one traced call. The kernel's sizes are this call's; size_exprs stay empty.
Lowered lower_graph(const GraphSample& sample);

/// Fits every size slot and float of `kernels` (one per sample, equal signatures) to an expression
/// of the call's arguments (SizeExpr, FloatParam). Returns the first kernel with size_exprs and
/// sources filled, or the slot that no expression fits.
Lowered fit_sizes(const std::vector<Kernel>& kernels, const std::vector<const GraphSample*>& samples);

/// Evaluates a size expression for a sample (the launcher does the same from the call's tensors).
std::optional<long long> eval_size(const SizeExpr& e, const GraphSample& sample);

}  // namespace kwiki::gen
