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
  bool real_ok = false;  ///< the given sizes' tensors are known
  std::string real_device, real_error;
  std::vector<TracedTensor> real_inputs, real_outputs;
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

/// Runs the reference of a benchmark task per shape (trace_task.py, embedded), writing data
/// files into `dir` (a private folder the caller made), in its own process group with a
/// scrubbed environment, killed at `timeout_seconds`. Fills each ShapeCase's inputs/outputs
/// from the given sizes' run. Never throws for the task's behaviour: failures are in the Trace.
Trace trace_task(Task& task, int timeout_seconds, const std::string& dir);

/// A traced tensor's data as floats / integers (the file's values; empty when not saved).
std::vector<float> load_floats(const Trace& trace, const TracedTensor& t);
std::vector<long long> load_integers(const Trace& trace, const TracedTensor& t);

}  // namespace kwiki::detail

namespace kwiki::detail {

/// The Python files the planner carries (trace_task.py, kwiki_device.py), by name; "" for others.
std::string planner_python_file(const std::string& name);

}  // namespace kwiki::detail
