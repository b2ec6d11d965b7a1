// Files compiled into the binary (kernel templates, harness sources), looked up by name.
#pragma once

#include <string>

namespace kwiki::detail {

/// One embedded file: its base name and its NUL-terminated bytes. Tables end with {nullptr, nullptr}.
struct EmbeddedFile {
  const char* name;
  const char* text;
};

/// The kernel templates, compat header and harness files kwiki baseline writes out.
extern const EmbeddedFile kBaselineFiles[];

/// The text of an embedded file, or "" when there is none of that name.
std::string embedded_file(const std::string& name);

}  // namespace kwiki::detail
