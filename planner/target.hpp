// Target resolution for plans: product -> architecture -> framework, compile target, ceilings.
#pragma once

#include <string>
#include <vector>

#include "kwiki/planner.hpp"
#include "kwiki/query.hpp"

namespace kwiki::detail {

/// Everything a plan needs to know about the GPU, each number cited.
struct TargetInfo {
  std::string product, vendor, arch;
  std::string framework;       ///< a kFrameworks name: cuda | hip | cutedsl | flydsl
  std::string compile_target;  ///< sm_90a, gfx942, gfx950, ...
  std::string spec_record;
  Ceilings ceilings;
  CitedValue compute_units;    ///< SM or CU count
  std::string compute_unit_name;  ///< "SM" or "CU"
  CitedValue l2_mb, onchip_kb;    ///< L2 (or LLC) and shared memory / LDS per SM/CU
  CitedValue llc_mb;              ///< a last-level cache beyond L2 (AMD's Infinity Cache), when the part has one
  std::string onchip_name;        ///< "shared memory" or "LDS"
  int warp_size = 32;
  std::vector<std::string> ceiling_records;  ///< measured-ceiling record ids used
  std::vector<std::string> notes;            ///< facts the wiki does not record
};

/// One architecture kwiki can compile for: its vendor and the compiler's target name.
struct ArchTarget {
  const char* arch;            ///< the wiki's architecture label
  const char* vendor;          ///< nvidia | amd
  const char* compile_target;  ///< nvcc -gencode sm_* / clang --offload-arch gfx*
};

/// Every architecture kwiki compiles for; plans name one of these compile targets.
inline constexpr ArchTarget kArchTargets[] = {
    {"hopper", "nvidia", "sm_90a"}, {"blackwell", "nvidia", "sm_100a"}, {"ampere", "nvidia", "sm_80"},
    {"cdna3", "amd", "gfx942"},     {"cdna4", "amd", "gfx950"},
};

/// The row whose compile target is `compile_target` (as read back from a plan), or nullptr: a
/// plan naming anything else is not one kwiki wrote and is refused before any compiler runs.
const ArchTarget* find_compile_target(const std::string& compile_target);

/// One language a V0 kernel is written in, and the vendor whose GPUs it targets.
struct FrameworkRow {
  const char* name;      ///< what --framework takes and the plan records (target.framework)
  const char* vendor;    ///< nvidia | amd
  const char* language;  ///< how the plan names it
  const char* query;     ///< the word(s) the knowledge queries carry for it
  bool native;           ///< the vendor's default (CUDA C++ / HIP C++, built by kwiki baseline)
  const char* no_fp8;    ///< why a generated kernel with fp8 values cannot be written in it ("" when it can)
};

/// Every framework kwiki writes V0 kernels in.
inline constexpr FrameworkRow kFrameworks[] = {
    {"cuda", "nvidia", "CUDA C++", "CUDA C++", true, ""},
    {"hip", "amd", "HIP C++", "HIP", true, ""},
    {"cutedsl", "nvidia", "CuteDSL (CUTLASS Python DSL)", "CuteDSL", false, ""},
    // flydsl 0.4.x: its cast to Float8E4M3FN or Float8E4M3FNUZ (arith.truncf) has no LLVM IR translation
    // (compile error on this machine for gfx942 and gfx950, session 17).
    {"flydsl", "amd", "FlyDSL (ROCm Python layout DSL)", "FlyDSL", false,
     "FlyDSL 0.4 cannot compile a cast to fp8 (its arith.truncf to an fp8 type has no LLVM IR translation)"},
};

/// The row named `name`, or nullptr.
const FrameworkRow* find_framework(const std::string& name);

/// Sets t.framework: `requested`, or the vendor's native one when empty. Throws kwiki::Error
/// kUsage naming the frameworks of t's vendor when `requested` is unknown or for the other vendor.
void choose_framework(TargetInfo& t, const std::string& requested);

/// Resolves `product` through the wiki. Throws kwiki::Error kNotRecorded (exit 3) naming the
/// recorded products when the wiki has no spec sheet for it.
TargetInfo resolve_target(QueryEngine& engine, const std::string& product, const std::string& dtype);

}  // namespace kwiki::detail
