// Helpers for kwiki tests: temporary folders, fixture copies, running the kwiki binary.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace kwiki::test {

/// A temporary folder removed (with its contents) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

/// What a kwiki process did.
struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

/// Runs the kwiki binary with `args` (shell-quoted here) and extra environment assignments.
/// `prefix` is prepended to the command (e.g. a privilege-dropping wrapper).
/// `stdin_path` is fed to its standard input (default /dev/null).
RunResult run_kwiki(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {},
                    const std::string& prefix = "", const std::string& stdin_path = "/dev/null");

/// Path of the kwiki binary under test.
std::string kwiki_binary();
/// The three-record fixture corpus (data/fixtures/mini-wiki).
std::string mini_wiki();
/// The bundled corpus (gpu-wiki/).
std::string bundled_wiki();
/// data/tasks of the source tree.
std::string tasks_dir();
/// Its task folders (those with an expected.json), sorted; with generator_proven, only those whose
/// expected.json says "generator": "proven".
std::vector<std::string> data_task_names(bool generator_proven = false);
/// The foreign corpus, or "" when ../shared/upstream-gpu-wiki is absent.
std::string upstream_wiki();

/// Copies a folder tree.
void copy_tree(const std::string& from, const std::string& to);
/// Reads / writes a whole file.
std::string read_text(const std::string& path);
void write_text(const std::string& path, const std::string& text);
/// Shell-quotes one argument.
std::string shell_quote(const std::string& s);

}  // namespace kwiki::test
