// The CPU twins built into a loadable library (the system C++ compiler, cached by source).
#pragma once

#include <string>

namespace kwiki::detail {

/// The twin library, or why there is none.
struct TwinLibrary {
  std::string path;      ///< libkwiki_twin.so in kwiki's cache ("" when it could not be built)
  std::string compiler;  ///< the compiler that built it
  std::string error;     ///< why not: no compiler, or its output
};

/// Builds planner/twin/ (embedded) with $CXX, else c++, g++ or clang++ from PATH, into
/// $XDG_CACHE_HOME/kwiki/twins/<hash>/ (else ~/.cache), once per source and compiler version.
/// Never throws for a missing or failing compiler (see error).
TwinLibrary build_twin_library();

/// Builds one C++ source (a generated CPU kernel) into lib<name>.so in kwiki's cache, once per
/// source and compiler version. Never throws for a missing or failing compiler (see error).
TwinLibrary build_source_library(const std::string& source, const std::string& name);

}  // namespace kwiki::detail
