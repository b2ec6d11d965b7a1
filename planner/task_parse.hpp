// Task files to a Task, from their text: the part of task intake that touches no file system.
#pragma once

#include <optional>
#include <string>

#include "kwiki/planner.hpp"

namespace kwiki::detail {

/// The files of a benchmark-layout task, as read (nullopt: the file is absent).
struct BenchmarkFiles {
  std::string dir;  ///< the task folder: the task's name and every error's location
  std::string reference, factory, shapes;
  std::optional<std::string> metadata, roofline;
};

/// Parses a benchmark-layout task. Throws kwiki::Error kBadInput / kInvalidJson /
/// kSchemaViolation naming the file and JSON pointer; never anything else on any input.
Task parse_benchmark_task(const BenchmarkFiles& files);

/// Parses a task.json (its "reference" must exist beside it). Throws as parse_benchmark_task.
Task parse_task_json(const std::string& path, const std::string& text);

}  // namespace kwiki::detail
