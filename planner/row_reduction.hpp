// The last-dimension reduction (sum / mean / max) a reference computes, read from its source.
#pragma once

#include <optional>
#include <string>

#include "kwiki/planner.hpp"

namespace kwiki::detail {

/// A reduction kwiki's row_reduce template computes exactly as the reference does.
struct RowReduction {
  std::string op;        ///< "sum", "mean" or "max"
  int op_code = 0;       ///< the template's op parameter: 0 sum, 1 mean, 2 max
  bool keepdim = false;  ///< the reference keeps the reduced dim (out is [..., 1])
  std::string evidence;  ///< the call that decided it
  std::string source_without_calls;  ///< the reference with the reduction calls cut out
};

/// The reference's single kind of reduction over dim -1 of an input (or of an input's .float()
/// or .to() copy), or nullopt: none, two different ones, a dtype argument, or an output dtype
/// other than the input's (a `.float()` reduction returned without `.to(x.dtype)`, or
/// metadata.json's output_dtypes) — the template stores in the input's type.
std::optional<RowReduction> detect_row_reduction(const Task& task);

/// The reference source of a task ("" when it has none or it cannot be read).
std::string reference_source(const Task& task);

}  // namespace kwiki::detail
