// shard_bench: query throughput (queries/s, 2 client threads, one engine each) over the foreign
// corpus for the single local index, the same corpus in 2 local shards, and 2 shards served by
// xapian-tcpsrv on loopback. Builds the indexes and starts and stops the servers itself.
// Usage: shard_bench [--upstream DIR] [--clients N] [--seconds S] [--rounds R]
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "kwiki/error.hpp"
#include "kwiki/indexer.hpp"
#include "kwiki/query.hpp"

extern char** environ;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

unsigned free_port() {
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

bool accepts(unsigned port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// xapian-tcpsrv in its own process group (on SIGTERM it signals its group).
pid_t start_server(const std::string& shard, unsigned port) {
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&files, 2, "/dev/null", O_WRONLY, 0);
  std::vector<std::string> args = {"xapian-tcpsrv", "--interface", "127.0.0.1", "--port", std::to_string(port), shard};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawnp(&pid, "xapian-tcpsrv", &files, &attr, argv.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attr);
  for (int i = 0; i < 100 && pid > 0 && !accepts(port); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return pid;
}

// Queries answered per second by `clients` threads, each with its own engine, for `seconds`.
double throughput(const std::string& index, const kwiki::OpenOptions& open, const std::vector<std::string>& requests, int clients,
                  double seconds) {
  std::atomic<long> answered{0};
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      try {
        kwiki::QueryEngine engine = kwiki::QueryEngine::open(index, open);
        kwiki::QueryOptions options;
        options.brief = true;
        for (std::size_t i = static_cast<std::size_t>(c);; i += static_cast<std::size_t>(clients)) {
          engine.query(requests[i % requests.size()], options);
          answered.fetch_add(1, std::memory_order_relaxed);
          if (std::chrono::duration<double>(Clock::now() - start).count() >= seconds) break;
        }
      } catch (const kwiki::Error& e) {
        std::fprintf(stderr, "shard_bench: %s\n", e.one_line().c_str());
        failed = true;
      }
    });
  }
  for (auto& t : threads) t.join();
  if (failed) return -1;
  return static_cast<double>(answered.load()) / std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string upstream = std::string(KWIKI_SOURCE_DIR) + "/../shared/upstream-gpu-wiki";
  int clients = 2, rounds = 3;
  double seconds = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--upstream" && i + 1 < argc) upstream = argv[++i];
    else if (a == "--clients" && i + 1 < argc) clients = std::stoi(argv[++i]);
    else if (a == "--seconds" && i + 1 < argc) seconds = std::stod(argv[++i]);
    else if (a == "--rounds" && i + 1 < argc) rounds = std::stoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: shard_bench [--upstream DIR] [--clients N] [--seconds S] [--rounds R]\n");
      return 2;
    }
  }
  if (!fs::is_directory(upstream)) {
    std::fprintf(stderr, "shard_bench: no foreign corpus at %s (--upstream DIR)\n", upstream.c_str());
    return 2;
  }
  std::vector<std::string> requests;
  {
    std::ifstream in(std::string(KWIKI_SOURCE_DIR) + "/data/eval/queries.jsonl");
    std::string line;
    while (std::getline(in, line))
      if (!line.empty()) requests.push_back(nlohmann::json::parse(line)["query"].get<std::string>());
  }
  const fs::path work = fs::temp_directory_path() / ("kwiki-shard-bench-" + std::to_string(::getpid()));
  fs::create_directories(work);
  std::vector<pid_t> servers;
  int status = 0;
  try {
    kwiki::IndexOptions single;
    single.wiki_roots = {upstream};
    single.index_dir = (work / "single").string();
    const kwiki::IndexReport r1 = kwiki::build_index(single);
    kwiki::IndexOptions sharded = single;
    sharded.index_dir = (work / "sharded").string();
    sharded.shards = 2;
    const kwiki::IndexReport r2 = kwiki::build_index(sharded);
    std::string remote;
    for (const auto& dir : r2.shard_dirs) {
      const unsigned port = free_port();
      const pid_t pid = start_server(dir, port);
      if (pid <= 0 || !accepts(port)) throw std::runtime_error("xapian-tcpsrv did not start (Debian package xapian-tools)");
      servers.push_back(pid);
      remote += (remote.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(port);
    }
    std::printf("shard_bench: %zu records (foreign corpus), %zu requests from data/eval/queries.jsonl, %d clients, %.0f s x %d rounds\n",
                r1.records, requests.size(), clients, seconds, rounds);
    struct Mode {
      const char* name;
      std::string index;
      kwiki::OpenOptions open;
    };
    kwiki::OpenOptions remote_open;
    remote_open.shards = remote;
    const std::vector<Mode> modes = {{"local single index", single.index_dir, {}},
                                     {"local 2 shards (stub)", sharded.index_dir, {}},
                                     {"remote 2 shards (xapian-tcpsrv, loopback)", sharded.index_dir, remote_open}};
    for (const auto& m : modes) {
      std::vector<double> qps;
      for (int r = 0; r < rounds; ++r) qps.push_back(throughput(m.index, m.open, requests, clients, seconds));
      std::sort(qps.begin(), qps.end());
      if (qps.front() < 0) throw std::runtime_error(std::string("queries failed in mode ") + m.name);
      std::printf("  %-44s median %8.0f queries/s  (min %.0f, max %.0f)\n", m.name, qps[qps.size() / 2], qps.front(), qps.back());
    }
  } catch (const kwiki::Error& e) {
    std::fprintf(stderr, "shard_bench: %s\n", e.one_line().c_str());
    status = 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shard_bench: %s\n", e.what());
    status = 1;
  }
  for (pid_t pid : servers) {
    ::kill(-pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
  }
  std::error_code ec;
  fs::remove_all(work, ec);
  return status;
}
