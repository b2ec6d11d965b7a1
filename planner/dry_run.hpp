// The dry run: executes a task's PyTorch reference once per shape to learn its true tensors.
#pragma once

#include <string>
#include <vector>

#include "kwiki/planner.hpp"

namespace kwiki::detail {

/// Outcome of a dry run.
struct DryRun {
  bool ran = false;
  std::string skipped_because;  ///< why it did not run (no python3, no torch, not a benchmark task)
  std::string device;           ///< cuda, meta or cpu
};

/// The interpreter kwiki runs task code with: $KWIKI_PYTHON, else python3 from PATH.
std::string python_interpreter();

/// Runs reference.py and input.py for each shape (python with torch; meta device when no GPU),
/// filling ShapeCase::inputs/outputs. The task's code runs in its own process group with a
/// scrubbed environment (subprocess.hpp); at `timeout_seconds` the group is killed and the dry
/// run is skipped with the reason. Throws kwiki::Error kBadInput naming reference.py (or
/// input.py) and the shape when the reference raises. Never throws when torch is missing.
DryRun dry_run(Task& task, int timeout_seconds = 120);

}  // namespace kwiki::detail
