// The CPU twins built into a loadable library (the system C++ compiler, cached by source).
#include "twin_build.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "file_util.hpp"
#include "kwiki/error.hpp"
#include "subprocess.hpp"
#include "trace.hpp"

namespace kwiki::detail {
namespace {

namespace fs = std::filesystem;

constexpr const char* kTwinSources[] = {"kwiki_twin.h", "kwiki_twin.cpp", "cpu_reference.hpp", "cpu_reference.cpp"};

std::string cache_root() {
  if (const char* c = std::getenv("XDG_CACHE_HOME"); c && *c) return std::string(c) + "/kwiki";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/kwiki";
  return (fs::temp_directory_path() / ("kwiki-cache-" + std::to_string(::getuid()))).string();
}

std::string find_compiler() {
  if (const char* cxx = std::getenv("CXX"); cxx && *cxx) return find_program(cxx);
  for (const char* name : {"c++", "g++", "clang++", "clang++-19"})
    if (std::string p = find_program(name); !p.empty()) return p;
  return {};
}

}  // namespace

TwinLibrary build_twin_library() {
  TwinLibrary lib;
  lib.compiler = find_compiler();
  if (lib.compiler.empty()) {
    lib.error = "no C++ compiler (set CXX, or install g++) to build the CPU twins";
    return lib;
  }
  ProcessSpec version;
  version.argv = {lib.compiler, "--version"};
  version.timeout_seconds = 60;
  std::string key = run_process(version).out;
  for (const char* name : kTwinSources) key += std::string("\x1f") + name + "\x1f" + planner_file(name);
  const fs::path dir = fs::path(cache_root()) / "twins" / hash64_hex(key);
  lib.path = (dir / "libkwiki_twin.so").string();
  std::error_code ec;
  if (fs::exists(lib.path, ec)) return lib;
  fs::create_directories(dir, ec);
  if (ec) {
    lib.error = "cannot create the twin cache " + dir.string() + ": " + ec.message();
    lib.path.clear();
    return lib;
  }
  for (const char* name : kTwinSources) write_file_atomically((dir / name).string(), planner_file(name));
  // Built under a private name and renamed in: a concurrent kwiki never loads half a library.
  std::string tmp = (dir / ".libkwiki_twin.so.kwiki-tmp-XXXXXX").string();
  const int fd = ::mkstemp(tmp.data());
  if (fd >= 0) ::close(fd);
  ProcessSpec compile;
  compile.argv = {lib.compiler, "-std=c++20", "-O2", "-shared", "-fPIC", "-o", tmp, (dir / "kwiki_twin.cpp").string(), (dir / "cpu_reference.cpp").string()};
  compile.timeout_seconds = 300;
  const ProcessResult build = run_process(compile);
  if (!build.ok() || ::rename(tmp.c_str(), lib.path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    lib.error = lib.compiler + " could not build the CPU twins: " + (build.started ? build.out.substr(0, 600) : build.error);
    lib.path.clear();
  }
  return lib;
}

TwinLibrary build_source_library(const std::string& source, const std::string& name) {
  TwinLibrary lib;
  lib.compiler = find_compiler();
  if (lib.compiler.empty()) {
    lib.error = "no C++ compiler (set CXX, or install g++) to build the generated CPU kernel";
    return lib;
  }
  ProcessSpec version;
  version.argv = {lib.compiler, "--version"};
  version.timeout_seconds = 60;
  const std::string key = run_process(version).out + "\x1f" + source;
  const fs::path dir = fs::path(cache_root()) / "generated" / hash64_hex(key);
  lib.path = (dir / ("lib" + name + ".so")).string();
  std::error_code ec;
  if (fs::exists(lib.path, ec)) return lib;
  fs::create_directories(dir, ec);
  if (ec) {
    lib.error = "cannot create the cache " + dir.string() + ": " + ec.message();
    lib.path.clear();
    return lib;
  }
  write_file_atomically((dir / (name + ".cpp")).string(), source);
  std::string tmp = (dir / (".lib" + name + ".so.kwiki-tmp-XXXXXX")).string();
  const int fd = ::mkstemp(tmp.data());
  if (fd >= 0) ::close(fd);
  ProcessSpec compile;
  compile.argv = {lib.compiler, "-std=c++17", "-O2", "-shared", "-fPIC", "-o", tmp, (dir / (name + ".cpp")).string()};
  compile.timeout_seconds = 300;
  const ProcessResult build = run_process(compile);
  if (!build.ok() || ::rename(tmp.c_str(), lib.path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    lib.error = lib.compiler + " could not build the generated CPU kernel: " + (build.started ? build.out.substr(0, 600) : build.error);
    lib.path.clear();
  }
  return lib;
}

}  // namespace kwiki::detail
