// A xapian-tcpsrv child process serving one shard on loopback, for shard_bench and the shard tests.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace kwiki::bench {

/// A loopback port nothing listens on now (the kernel picks it).
inline unsigned free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

/// True when something accepts connections on the loopback port.
inline bool loopback_accepts(unsigned port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

/// xapian-tcpsrv serving `shard_dir` on 127.0.0.1:`port`, stopped on destruction. It runs in its
/// own process group: on SIGTERM the server signals its whole group, which must not be ours.
class TcpServerProcess {
 public:
  TcpServerProcess(const std::string& shard_dir, unsigned port) : port_(port) {
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&files, 2, "/dev/null", O_WRONLY, 0);
    std::vector<std::string> args = {"xapian-tcpsrv", "--interface", "127.0.0.1", "--port", std::to_string(port), shard_dir};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawnp(&pid_, "xapian-tcpsrv", &files, &attr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&files);
    posix_spawnattr_destroy(&attr);
    for (int i = 0; i < 100 && pid_ > 0 && !loopback_accepts(port_); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  TcpServerProcess(const TcpServerProcess&) = delete;
  TcpServerProcess& operator=(const TcpServerProcess&) = delete;
  ~TcpServerProcess() { stop(); }

  bool listening() const { return pid_ > 0 && loopback_accepts(port_); }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }
  /// Stops the server and the children it forked per connection.
  void stop() {
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  unsigned port_;
};

}  // namespace kwiki::bench
