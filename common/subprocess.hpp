// Child processes from argument vectors: no shell, own process group, a deadline, captured output.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kwiki::detail {

/// What to run. argv[0] is a path, or a name looked up in PATH (find_program). Nothing here is
/// ever parsed by a shell: each element reaches the program as one argument, byte for byte.
struct ProcessSpec {
  std::vector<std::string> argv;
  std::string cwd;                 ///< working folder ("" = kwiki's own)
  /// The child's whole environment as KEY=VALUE entries; nullopt inherits kwiki's.
  std::optional<std::vector<std::string>> environment;
  /// Variables set (or replaced) on top of the environment above.
  std::vector<std::pair<std::string, std::string>> set_env;
  std::string stdin_text;          ///< written to the child's stdin, which is then closed
  double timeout_seconds = 0;      ///< > 0: the whole process group is killed at this deadline
  bool merge_stderr = true;        ///< stderr goes to the same capture as stdout
  std::size_t max_output_bytes = std::size_t{64} << 20;  ///< capture is cut here (the rest is read and dropped)
};

/// How it ended. `started` is false when the program could not be run at all (`error` says why).
struct ProcessResult {
  bool started = false;
  bool timed_out = false;          ///< killed at the deadline
  int exit_code = -1;              ///< the exit status; 128 + N when killed by signal N
  std::string out;                 ///< stdout (and stderr when merged)
  std::string err;                 ///< stderr when not merged
  std::string error;               ///< why it did not start, or what went wrong reading it
  bool ok() const { return started && !timed_out && exit_code == 0; }
};

/// Runs the program to completion, in its own process group. At the deadline, or when the
/// program has exited but descendants still hold its output pipes, the whole group is killed
/// (SIGKILL) and reading stops: a detached child cannot keep kwiki waiting. Never throws for
/// the child's behaviour; throws kwiki::Error kUsage for an empty argv.
ProcessResult run_process(const ProcessSpec& spec);

/// The absolute path of `name` found in PATH (or `name` itself when it contains a '/' and is
/// executable); "" when there is none.
std::string find_program(const std::string& name);

/// A minimal environment for code kwiki runs on a user's behalf (a task's reference.py): the
/// variables that locate interpreters, libraries and devices, and none of the rest (tokens,
/// keys, credentials). Values are taken from kwiki's own environment.
std::vector<std::string> scrubbed_environment();

}  // namespace kwiki::detail

namespace kwiki::detail {

/// Runs `git <args>` in `dir` as kwiki's own committer, with repository hooks and fsmonitor
/// commands switched off (a workspace's .git/config cannot make kwiki run a program).
ProcessResult run_git(const std::string& dir, const std::vector<std::string>& args, double timeout_seconds = 120);

}  // namespace kwiki::detail
