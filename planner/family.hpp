// The kernel families: one table of what kwiki can build a V0 for, and what each stage needs of it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "kwiki/planner.hpp"

namespace kwiki::detail {

/// The sizes a work counter reads (canonical names of ShapeCase::dims), and the element size.
struct WorkInput {
  const ShapeCase& shape;
  double element_bytes;
  std::optional<double> dim(const char* name) const;
};

/// One family. Adding one is a row here, its counter, its twin (planner/twin/kwiki_twin.cpp), its
/// Python adapter (planner/python/kwiki_families.py, same name) and its kernel template
/// (baseline/kernels/<name>.cuh); the rest of kwiki reads the row. A V0 in a Python DSL as well is
/// a word in dsl_frameworks and its file, baseline/kernels/<name>_<framework>.py.
struct FamilyRow {
  const char* name;
  const char* aliases;          ///< space-separated other names (--pattern, task hints)
  const char* lexicon_operator; ///< the operator word of its knowledge queries
  const char* abi;              ///< its launcher's tensors, dims and params (baseline/kernels/ABI.md)
  const char* optional_roles;   ///< space-separated roles a shape may lack (a gemm without bias)
  std::optional<WorkCounts> (*work)(const WorkInput&);  ///< FLOPs and bytes from the shape's sizes
  /// The family writes a few rows into a large input updated in place (a paged KV cache), or reads
  /// only part of one (fused_moe: the routed experts of the weight stacks): its bytes are the
  /// counter's, not the sum of the dry run's tensors (which holds the whole cache or stack).
  bool updates_part_of_input = false;
  /// Space-separated DSL frameworks (kFrameworks names: cutedsl, flydsl) the family has a hand-written
  /// V0 in: kwiki baseline writes baseline/kernels/<name>_<framework>.py as kernel.py.
  const char* dsl_frameworks = "";
};

/// Every family, in the order the proof tries them (a more specific one before the one it contains).
extern const FamilyRow kFamilies[];
/// How many rows kFamilies has.
extern const std::size_t kFamilyCount;

/// The row named (or aliased) `name`, or nullptr.
const FamilyRow* find_family(std::string_view name);

/// Whether `row` has a hand-written V0 in the DSL framework `framework` (a word of dsl_frameworks).
bool family_has_dsl_kernel(const FamilyRow& row, std::string_view framework);

/// The embedded file of that V0: "<name>_<framework>.py" (baseline/kernels/).
std::string dsl_kernel_file(const FamilyRow& row, std::string_view framework);

/// Every family name, comma-separated in table order (the proof's --families argument).
std::string family_names();

}  // namespace kwiki::detail
