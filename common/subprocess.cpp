// Child processes from argument vectors: posix_spawn, own process group, poll with a deadline.
#include "subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "kwiki/error.hpp"

extern char** environ;

namespace kwiki::detail {
namespace {

using Clock = std::chrono::steady_clock;

// After the program exits, descendants that inherited its pipes get this long to let go.
constexpr std::chrono::milliseconds kDrainGrace{500};
// Poll wakes at least this often to notice that the program exited while pipes stay open.
constexpr int kPollSliceMs = 50;

// Both ends close on exec; the child's ends are dup2'ed onto 0/1/2, which clears the flag there.
struct Pipe {
  int fd[2] = {-1, -1};
  bool open() { return ::pipe2(fd, O_CLOEXEC) == 0; }
  static void close_fd(int& f) {
    if (f >= 0) ::close(f);
    f = -1;
  }
  ~Pipe() {
    close_fd(fd[0]);
    close_fd(fd[1]);
  }
};

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

bool executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::vector<std::string> environment_of(const ProcessSpec& spec) {
  std::vector<std::string> env;
  if (spec.environment) {
    env = *spec.environment;
  } else {
    for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  }
  for (const auto& [key, value] : spec.set_env) {
    const std::string prefix = key + "=";
    env.erase(std::remove_if(env.begin(), env.end(), [&](const std::string& e) { return e.rfind(prefix, 0) == 0; }), env.end());
    env.push_back(prefix + value);
  }
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Writes to a pipe whose reader may be gone, without a process-wide SIGPIPE disposition change:
// SIGPIPE is blocked for this thread and a pending one is consumed.
ssize_t write_no_sigpipe(int fd, const char* data, std::size_t size) {
  sigset_t pipe_set, old_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
  const ssize_t n = ::write(fd, data, size);
  const int saved = errno;
  if (n < 0 && saved == EPIPE) {
    const timespec zero{0, 0};
    sigtimedwait(&pipe_set, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old_set, nullptr);
  errno = saved;
  return n;
}

}  // namespace

std::string find_program(const std::string& name) {
  if (name.empty()) return {};
  if (name.find('/') != std::string::npos) return executable_file(name) ? name : std::string();
  const char* path = std::getenv("PATH");
  std::string dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const std::size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = dirs.substr(start, end - start);
    // An empty PATH element means the current folder; kwiki never runs programs from there.
    if (!dir.empty() && dir.front() == '/' && executable_file(dir + "/" + name)) return dir + "/" + name;
    start = end + 1;
  }
  return {};
}

std::vector<std::string> scrubbed_environment() {
  static const char* const kKept[] = {"PATH", "HOME", "USER", "LOGNAME", "LANG", "TZ", "TMPDIR", "TERM",
                                      "LD_LIBRARY_PATH", "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX",
                                      "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
                                      "ROCM_PATH", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "XDG_CACHE_HOME"};
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    const bool kept = std::any_of(std::begin(kKept), std::end(kKept), [&](const char* k) { return key == k; }) || key.rfind("LC_", 0) == 0;
    if (kept) env.push_back(entry);
  }
  return env;
}

ProcessResult run_process(const ProcessSpec& spec) {
  if (spec.argv.empty() || spec.argv.front().empty()) throw Error(ErrorCode::kUsage, "run_process: no program given");
  ProcessResult result;
  const std::string program = find_program(spec.argv.front());
  if (program.empty()) {
    result.error = spec.argv.front() + ": not found" + (spec.argv.front().find('/') == std::string::npos ? " in PATH" : "");
    return result;
  }
  Pipe in, out, err;
  if (!in.open() || !out.open() || (!spec.merge_stderr && !err.open())) {
    result.error = std::string("cannot create pipes: ") + std::strerror(errno);
    return result;
  }
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_adddup2(&files, in.fd[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&files, out.fd[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&files, spec.merge_stderr ? out.fd[1] : err.fd[1], STDERR_FILENO);
  if (!spec.cwd.empty()) posix_spawn_file_actions_addchdir_np(&files, spec.cwd.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int s : {SIGPIPE, SIGINT, SIGTERM, SIGQUIT, SIGCHLD}) sigaddset(&defaults, s);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);  // its own process group, led by the child
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<std::string> args = spec.argv;
  std::vector<std::string> env = environment_of(spec);
  std::vector<char*> argv = c_strings(args), envp = c_strings(env);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, program.c_str(), &files, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    result.error = program + ": cannot start: " + std::strerror(rc);
    return result;
  }
  result.started = true;
  Pipe::close_fd(in.fd[0]);
  Pipe::close_fd(out.fd[1]);
  Pipe::close_fd(err.fd[1]);
  for (int fd : {in.fd[1], out.fd[0], err.fd[0]})
    if (fd >= 0) set_nonblocking(fd);
  if (spec.stdin_text.empty()) Pipe::close_fd(in.fd[1]);

  const auto started = Clock::now();
  const auto deadline = spec.timeout_seconds > 0
                            ? started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(spec.timeout_seconds))
                            : Clock::time_point::max();
  std::optional<Clock::time_point> drain_until;
  std::size_t stdin_sent = 0;
  char buf[65536];
  auto capture = [&](std::string& into, const char* data, std::size_t n) {
    const std::size_t room = into.size() < spec.max_output_bytes ? spec.max_output_bytes - into.size() : 0;
    into.append(data, std::min(n, room));
  };
  for (;;) {
    // Has the program exited? (WNOWAIT: it stays a zombie, so its group id cannot be reused yet.)
    siginfo_t info{};
    if (!drain_until && ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid)
      drain_until = std::min(deadline, Clock::now() + kDrainGrace);
    const bool reading = out.fd[0] >= 0 || err.fd[0] >= 0;
    if (!reading && drain_until) break;
    const auto now = Clock::now();
    if (now >= deadline) {
      result.timed_out = true;
      break;
    }
    if (drain_until && now >= *drain_until) break;
    pollfd fds[3];
    int count = 0;
    for (int fd : {out.fd[0], err.fd[0]})
      if (fd >= 0) fds[count++] = {fd, POLLIN, 0};
    if (in.fd[1] >= 0) fds[count++] = {in.fd[1], POLLOUT, 0};
    const auto limit = std::min(deadline, drain_until.value_or(Clock::time_point::max()));
    long long wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(limit - now).count() + 1;
    wait_ms = std::clamp<long long>(wait_ms, 0, kPollSliceMs);
    if (count == 0) {
      ::usleep(static_cast<useconds_t>(std::min<long long>(wait_ms, 5) * 1000));  // no pipes left: wait for the exit
      continue;
    }
    if (::poll(fds, static_cast<nfds_t>(count), static_cast<int>(wait_ms)) < 0 && errno != EINTR) {
      result.error = std::string("poll failed: ") + std::strerror(errno);
      break;
    }
    for (int i = 0; i < count; ++i) {
      if (fds[i].revents == 0) continue;
      if (fds[i].fd == in.fd[1]) {
        const ssize_t n = write_no_sigpipe(in.fd[1], spec.stdin_text.data() + stdin_sent, spec.stdin_text.size() - stdin_sent);
        if (n > 0) stdin_sent += static_cast<std::size_t>(n);
        if ((n < 0 && errno != EAGAIN) || stdin_sent == spec.stdin_text.size()) Pipe::close_fd(in.fd[1]);
        continue;
      }
      int& fd = fds[i].fd == out.fd[0] ? out.fd[0] : err.fd[0];
      std::string& into = fds[i].fd == out.fd[0] ? result.out : result.err;
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) capture(into, buf, static_cast<std::size_t>(n));
      else if (n == 0 || (errno != EAGAIN && errno != EINTR)) Pipe::close_fd(fd);
    }
  }
  // Whatever is left of the group (the program at a deadline, children it left behind) goes.
  ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) result.exit_code = 128 + WTERMSIG(status);
  return result;
}

}  // namespace kwiki::detail

namespace kwiki::detail {

ProcessResult run_git(const std::string& dir, const std::vector<std::string>& args, double timeout_seconds) {
  ProcessSpec spec;
  spec.argv = {"git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "user.name=kwiki", "-c",
               "user.email=kwiki@localhost", "-c", "commit.gpgsign=false"};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.cwd = dir;
  spec.timeout_seconds = timeout_seconds;
  // Git reads no pager, editor or prompt here: kwiki runs it without a terminal.
  spec.set_env = {{"GIT_TERMINAL_PROMPT", "0"}, {"GIT_PAGER", "cat"}, {"GIT_EDITOR", "true"}};
  return run_process(spec);
}

}  // namespace kwiki::detail
