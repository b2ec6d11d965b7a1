// query_bench: latency of kwiki query, as a whole process (start, open, answer, exit) and
// in-process, on the bundled corpus, the foreign corpus and (with --records N) a generated one.
// Usage: query_bench [--kwiki PATH] [--upstream DIR] [--runs N] [--records N] [--index DIR] [--brief BYTES] [--in-process-only]
// (--index DIR times that existing index only, e.g. a generated 1M-record one kept from a run;
// --brief BYTES times the answer an agent affords: --brief --max-bytes BYTES)
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "corpus_generator.hpp"
#include "kwiki/indexer.hpp"
#include "kwiki/query.hpp"

extern char** environ;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

const std::vector<std::string> kRequests = {
    "my bf16 rmsnorm on H200 only reaches 70% of DRAM bandwidth",
    "decode attention with GQA on MI300X, batch 1, how do I split the KV?",
    "ptxas reports 256 bytes spill stores in my sm_90a gemm",
    "what is the bf16 dense peak and memory bandwidth of H20",
    "online softmax in triton for long rows",
    "fp8 per-token quantization pitfalls on gfx942",
    "wgmma shapes and TMA for a Hopper GEMM",
    "moe top-k gating softmax kernel",
};

struct Stats {
  double median = 0, p10 = 0, p90 = 0;
};

// --brief BYTES: the brief form within a byte budget (0: the default, whole records).
std::size_t g_brief_bytes = 0;

Stats stats_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1))]; };
  return {at(0.5), at(0.1), at(0.9)};
}

double run_process(const std::string& kwiki, const std::string& index, const std::string& request) {
  std::vector<std::string> args = {kwiki, "query", request, "--index", index, "--json"};
  if (g_brief_bytes != 0) args.insert(args.end(), {"--brief", "--max-bytes", std::to_string(g_brief_bytes)});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  const auto t0 = Clock::now();
  pid_t pid = 0;
  if (posix_spawn(&pid, kwiki.c_str(), &actions, nullptr, argv.data(), environ) != 0) {
    std::perror("posix_spawn");
    std::exit(1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  posix_spawn_file_actions_destroy(&actions);
  if (!WIFEXITED(status) || WEXITSTATUS(status) > 3 || WEXITSTATUS(status) == 2) {
    std::fprintf(stderr, "query_bench: kwiki exited %d for \"%s\"\n", WEXITSTATUS(status), request.c_str());
    std::exit(1);
  }
  return ms;
}

void bench_corpus(const std::string& name, const std::string& kwiki, const std::string& index, int runs, bool process) {
  if (process) {
    std::vector<double> times;
    for (const auto& r : kRequests) run_process(kwiki, index, r);  // warm the page cache
    for (int i = 0; i < runs; ++i) times.push_back(run_process(kwiki, index, kRequests[static_cast<std::size_t>(i) % kRequests.size()]));
    const Stats s = stats_of(times);
    std::printf("%-20s whole process   median %7.2f ms   p10 %7.2f   p90 %7.2f   (n=%d)\n", name.c_str(), s.median, s.p10, s.p90, runs);
  }
  kwiki::QueryEngine engine = kwiki::QueryEngine::open(index);
  kwiki::QueryOptions options;
  options.log = false;
  options.brief = g_brief_bytes != 0;
  options.max_bytes = g_brief_bytes;
  std::vector<double> times;
  for (const auto& r : kRequests) engine.query(r, options);
  for (int i = 0; i < runs; ++i) {
    const auto t0 = Clock::now();
    engine.query(kRequests[static_cast<std::size_t>(i) % kRequests.size()], options);
    times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  const Stats s = stats_of(times);
  std::printf("%-20s in-process      median %7.3f ms   p10 %7.3f   p90 %7.3f   (n=%d)\n", name.c_str(), s.median, s.p10, s.p90, runs);
  std::fflush(stdout);
}

std::string build(const std::string& root, const std::string& index) {
  kwiki::IndexOptions options;
  options.wiki_roots = {root};
  options.index_dir = index;
  const auto t0 = Clock::now();
  const auto report = kwiki::build_index(options);
  std::fprintf(stderr, "query_bench: indexed %zu records from %s in %.1f s\n", report.records, root.c_str(),
               std::chrono::duration<double>(Clock::now() - t0).count());
  return index;
}

}  // namespace

int main(int argc, char** argv) {
  std::string kwiki = KWIKI_BINARY, upstream = std::string(KWIKI_SOURCE_DIR) + "/../shared/upstream-gpu-wiki";
  int runs = 200;
  std::size_t generated = 0;
  std::string existing;  // --index DIR: time this index only (e.g. a 1M-record one kept from an earlier run)
  bool process = true;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--in-process-only") {
      process = false;
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      --argc;
      break;
    }
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--kwiki") kwiki = argv[i + 1];
    else if (a == "--upstream") upstream = argv[i + 1];
    else if (a == "--runs") runs = std::stoi(argv[i + 1]);
    else if (a == "--records") generated = std::stoul(argv[i + 1]);
    else if (a == "--index") existing = argv[i + 1];
    else if (a == "--brief") g_brief_bytes = std::stoul(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: query_bench [--kwiki PATH] [--upstream DIR] [--runs N] [--records N] [--index DIR] [--brief BYTES] [--in-process-only]\n");
      return 2;
    }
  }
  if (!existing.empty()) {
    if (!fs::is_directory(existing)) {
      std::fprintf(stderr, "query_bench: --index %s: no such folder\n", existing.c_str());
      return 2;
    }
    std::printf("query_bench: %ld online CPUs, %zu requests cycled%s\n", sysconf(_SC_NPROCESSORS_ONLN), kRequests.size(),
                g_brief_bytes ? (", --brief --max-bytes " + std::to_string(g_brief_bytes)).c_str() : "");
    bench_corpus(fs::path(existing).filename().string(), kwiki, existing, runs, process);
    return 0;
  }
  const std::string scratch = (fs::temp_directory_path() / ("kwiki-query-bench-" + std::to_string(getpid()))).string();
  fs::create_directories(scratch);
  std::printf("query_bench: %ld online CPUs, %zu requests cycled%s\n", sysconf(_SC_NPROCESSORS_ONLN), kRequests.size(),
              g_brief_bytes ? (", --brief --max-bytes " + std::to_string(g_brief_bytes)).c_str() : "");
  bench_corpus("bundled gpu-wiki", kwiki, build(kwiki::bundled_wiki_dir(), scratch + "/bundled"), runs, process);
  if (fs::is_directory(upstream)) bench_corpus("upstream-gpu-wiki", kwiki, build(upstream, scratch + "/upstream"), runs, process);
  else std::printf("upstream-gpu-wiki    skipped: %s not found\n", upstream.c_str());
  if (generated > 0) {
    std::fprintf(stderr, "query_bench: generating %zu records...\n", generated);
    kwiki::bench::generate_corpus(scratch + "/generated", generated);
    bench_corpus("generated-" + std::to_string(generated), kwiki, build(scratch + "/generated", scratch + "/generated-index"),
                 std::min(runs, 100), false);
  }
  fs::remove_all(scratch);
  return 0;
}
