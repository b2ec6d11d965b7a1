// The Python DSL backends' shared writer: one kernel IR to a kernel.py whose Model.forward launches
// a kernel written in a DSL (CuteDSL, FlyDSL); each DSL supplies its spellings as a DslDialect.
#pragma once

#include <string>

#include "kernel_ir.hpp"

namespace kwiki::gen {

/// What one DSL spells differently; everything else in kernel.py (the IR's statements, the launch
/// recipe, the host side) is written once, by emit_dsl_model.
struct DslDialect {
  const char* name;              ///< "CuteDSL", "FlyDSL": named in comments and errors
  const char* types;             ///< module prefix of the numeric types ("cutlass.", "fx."): Float32, BFloat16, Int64, ...
  const char* kernel_decorator;  ///< "@cute.kernel"
  const char* jit_decorator;     ///< "@cute.jit"
  const char* tensor_type;       ///< annotation of a tensor argument
  const char* thread_index;      ///< expression: the thread's index in its block (x)
  const char* block_index;       ///< expression: the block's index (x)
  int group;                     ///< lanes of a warp (32) or wavefront (64): the reductions' first stage
  const char* shared_prologue;   ///< statement before any shared array ("" when none is needed)
  const char* shared_array;      ///< expression allocating a shared array: {T} element type, {N} elements
  const char* launch_params;     ///< extra parameters of the jit launcher after the kernel's (a stream)
  const char* launch_call;       ///< kernel launch statement: {CALL} the kernel call, {GRID} grid x, {BLOCK} threads
  const char* unroll;            ///< the DSL's trace-time range (a loop the tracer unrolls): "cutlass.range_constexpr"
  const char* prelude;           ///< imports and the kw_* helpers the op table's Python spellings use; also the
                                 ///< chunk helpers kw_tiles(t, W), kw_tile(tiles, i), kw_fragment(T, W), kw_copy(src, dst, T, bits)
  const char* host;              ///< the host side: _launch, compile_check (reads the recipe kernel.py defines)
};

/// The whole kernel.py: prelude, the kernel (elementwise or row skeleton, by schedule()), its jit
/// launcher, the launch recipe and the Model whose forward allocates, launches and returns what
/// the reference returns (`returns`: tensor | tuple | dict, as plans/graph.json records it).
/// The kernel must have fitted size expressions. Throws std::logic_error otherwise.
std::string emit_dsl_model(const Kernel& k, const DslDialect& dialect, const std::string& returns, const std::string& target);

}  // namespace kwiki::gen
