// shard_bench: query throughput (queries/s, 2 client threads, one engine each) over the foreign
// corpus for the single local index, the same corpus in 2 local shards, and 2 shards served by
// xapian-tcpsrv on loopback. Builds the indexes and starts and stops the servers itself.
// Usage: shard_bench [--upstream DIR] [--clients N] [--seconds S] [--rounds R]
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "kwiki/error.hpp"
#include "kwiki/indexer.hpp"
#include "kwiki/query.hpp"
#include "tcpsrv_process.hpp"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

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
  std::vector<std::unique_ptr<kwiki::bench::TcpServerProcess>> servers;
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
      servers.push_back(std::make_unique<kwiki::bench::TcpServerProcess>(dir, kwiki::bench::free_loopback_port()));
      if (!servers.back()->listening()) throw std::runtime_error("xapian-tcpsrv did not start (Debian package xapian-tools)");
      remote += (remote.empty() ? "" : ",") + servers.back()->endpoint();
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
  servers.clear();
  std::error_code ec;
  fs::remove_all(work, ec);
  return status;
}
