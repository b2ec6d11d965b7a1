// The generator's backends: one kernel IR to CUDA C++ (sm_90a), HIP C++ (gfx942/gfx950) and C++ for
// the CPU (the twin), each exporting kwiki_launch of the launcher ABI (dims: the size slots; params: the floats).
#pragma once

#include <string>

#include "kernel_ir.hpp"

namespace kwiki::gen {

enum class Backend { kCpu, kCuda, kHip };

/// The skeleton the scheduler picks for a kernel (the launcher also picks at run time between
/// the 16-byte vector path and the scalar one, and between rows in registers and re-read rows).
enum class Skeleton { kElementwise, kRow };
Skeleton schedule(const Kernel& k);
const char* skeleton_name(Skeleton s);

/// The whole source file for a backend: prelude, kernels, launcher. The kernel must have its
/// size expressions fitted (constant slots become literals).
std::string emit_source(const Kernel& k, Backend backend);

/// kernel.py for the DSL backends (codegen_cutedsl.cpp, codegen_flydsl.cpp; shared writer in
/// codegen_dsl.cpp): the kernel in the DSL, its launcher, and a Model whose forward launches it and
/// returns `returns` (tensor | tuple | dict, as plans/graph.json records the reference's result).
/// `target` is the plan's compile target (sm_90a; gfx942, gfx950), which compile_check() builds for.
/// Needs fitted size expressions (std::logic_error otherwise).
std::string emit_cutedsl_model(const Kernel& k, const std::string& returns, const std::string& target);
std::string emit_flydsl_model(const Kernel& k, const std::string& returns, const std::string& target);

}  // namespace kwiki::gen
