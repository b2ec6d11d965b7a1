// The trace: what a task's reference computes, recorded by running it (python with torch).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kwiki/planner.hpp"

namespace kwiki::detail {

/// One tensor (or non-tensor value) the trace saw.
struct TracedTensor {
  std::string name;      ///< the input's or parameter's name, or the output's (out, out0.., dict key)
  std::string kind;      ///< input | param | output | updated
  bool is_tensor = true;
  std::vector<long long> shape;
  std::string dtype;     ///< kwiki's name (bf16, fp32, int32, fp8_e4m3fn, ...)
  std::string file;      ///< its data in the trace folder ("" when not saved)
  std::string storage;   ///< f32 | i64 | u8: how the file holds it
  bool updated = false;  ///< an input the reference wrote in place
  std::string alias_of;  ///< an output that is an input object
  std::string graph_name;  ///< an output: the graph's name of its tensor (t7, or an input's name)
  std::vector<long long> stride;  ///< element strides (empty when not recorded)
  nlohmann::json value;  ///< a non-tensor input's value
  long long numel() const;
};

/// One shape of the task, traced.
struct ShapeTrace {
  std::string id;
  bool ok = false;       ///< the small run worked (graph and data present)
  std::string error;     ///< why not: "reference.py: ValueError: ..."
  int factor = 1;        ///< the small run's sizes are the given ones divided by this
  nlohmann::json small_init_kwargs, small_input_kwargs;
  std::string form;      ///< tensor | tuple | dict: what forward returns
  std::vector<TracedTensor> inputs, params, outputs, updated;
  nlohmann::json graph;  ///< {"ops": [...], "truncated": bool}: the aten ops of the small run
  nlohmann::json proof;  ///< each family's best binding and how its twin compared (kwiki_families.prove)
  bool real_ok = false;  ///< the given sizes' tensors are known
  std::string real_device, real_error;
  std::vector<TracedTensor> real_inputs, real_outputs, real_params;
  nlohmann::json real_graph;  ///< {"ops": [...]}: the aten ops at the given sizes (meta device), or null
  double real_matrix_flops = 0, real_vector_flops = 0;  ///< counted op by op at the given sizes
};

/// The whole trace of a task.
struct Trace {
  bool ran = false;            ///< torch ran the reference (some shapes may still have failed)
  std::string skipped_because; ///< why it did not run at all
  std::string python;          ///< the interpreter used
  std::string torch_version;
  std::vector<std::string> limitations;  ///< what this torch cannot run (no float8 dtypes, ...)
  std::vector<std::string> interpreters_tried;
  std::string dir;             ///< the folder holding the data files
  std::vector<ShapeTrace> shapes;

  /// The shape's trace, or nullptr.
  const ShapeTrace* shape(const std::string& id) const;
  /// The graph of every shape, as plans/graph.json keeps it.
  nlohmann::ordered_json graph_json() const;
};

/// The interpreter to run task code with: $KWIKI_PYTHON when set; else the first of python3 on
/// PATH, /usr/bin/python3, python on PATH that imports torch (else the first that exists).
/// `tried` lists each candidate and what it said.
std::string find_python(std::vector<std::string>* tried = nullptr);

/// What the trace also does: prove the families of kFamilies with the twin library at `twin_library`
/// ("" = record only).
struct TraceOptions {
  int timeout_seconds = 300;
  std::string dir;           ///< a private folder the caller made: data files and scripts go here
  std::string twin_library;  ///< the CPU twins (twin_build.hpp), or "" to skip the proof
  std::string families;      ///< comma-separated family names to try, in order
};

/// Runs the reference of a benchmark task per shape (trace_task.py, embedded), in its own
/// process group with a scrubbed environment, killed at the deadline. Fills each ShapeCase's
/// inputs/outputs from the given sizes' run. Never throws for the task's behaviour: a module that
/// does not import, a reference that raises, a deadline passed are all in the Trace.
Trace trace_task(Task& task, const TraceOptions& options);

/// A traced tensor's data as floats / integers (the file's values; empty when not saved).
std::vector<float> load_floats(const Trace& trace, const TracedTensor& t);
std::vector<long long> load_integers(const Trace& trace, const TracedTensor& t);

}  // namespace kwiki::detail

namespace kwiki::detail {

/// The files the planner carries, by name: the Python of the trace and the families
/// (trace_task.py, kwiki_device.py, kwiki_families.py) and the twin sources (kwiki_twin.h,
/// kwiki_twin.cpp, cpu_reference.hpp, cpu_reference.cpp); "" for others.
std::string planner_file(const std::string& name);

}  // namespace kwiki::detail
