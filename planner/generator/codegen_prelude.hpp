// The fixed part of every generated source: element conversions with torch's rounding, the kw_*
// helpers the op spellings call, chunked vector I/O and group reductions.
#pragma once

#include <string>

namespace kwiki::gen {

/// C++ for the CPU twin (self-contained).
const std::string& cpu_prelude();
/// CUDA/HIP C++ (includes kwiki_compat.cuh, which kwiki baseline inlines).
const std::string& gpu_prelude();

}  // namespace kwiki::gen
