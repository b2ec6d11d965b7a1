// index_bench: records/s and peak memory of `build_index` on the foreign corpus and on a
// generated corpus. Usage: index_bench [--records N] [--upstream DIR] [--runs K]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "corpus_generator.hpp"
#include "kwiki/indexer.hpp"

namespace fs = std::filesystem;

namespace {

struct RunResult {
  double seconds = 0;      // wall clock inside build_index, fixed costs included
  double cpu_seconds = 0;  // user + system time of the whole child process
  std::size_t records = 0;
  long peak_rss_kb = 0;
};

// Each run is a fresh child process, so peak RSS is that run's alone.
RunResult run_once(const std::string& corpus, const std::string& index_dir) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) std::exit(1);
  const pid_t pid = fork();
  if (pid == 0) {
    close(pipe_fds[0]);
    kwiki::IndexOptions options;
    options.wiki_roots = {corpus};
    options.index_dir = index_dir;
    options.force = true;
    const auto report = kwiki::build_index(options);
    char buf[128];
    const int n = std::snprintf(buf, sizeof buf, "%.6f %zu", report.seconds, report.records);
    if (write(pipe_fds[1], buf, static_cast<std::size_t>(n)) < 0) _exit(2);
    _exit(0);
  }
  close(pipe_fds[1]);
  char buf[128] = {};
  const ssize_t got = read(pipe_fds[0], buf, sizeof buf - 1);
  close(pipe_fds[0]);
  int status = 0;
  struct rusage usage {};
  wait4(pid, &status, 0, &usage);
  RunResult r;
  if (got <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "index_bench: indexing %s failed\n", corpus.c_str());
    std::exit(1);
  }
  std::sscanf(buf, "%lf %zu", &r.seconds, &r.records);
  r.peak_rss_kb = usage.ru_maxrss;
  r.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                  static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  return r;
}

void report(const char* name, const std::string& corpus, const std::string& scratch, int runs) {
  std::vector<double> rates, cpu;
  long peak = 0;
  std::size_t records = 0;
  for (int i = 0; i < runs; ++i) {
    const std::string index_dir = scratch + "/index-" + name;
    fs::remove_all(index_dir);
    const RunResult r = run_once(corpus, index_dir);
    rates.push_back(static_cast<double>(r.records) / r.seconds);
    cpu.push_back(r.cpu_seconds);
    peak = std::max(peak, r.peak_rss_kb);
    records = r.records;
    fs::remove_all(index_dir);
  }
  std::sort(rates.begin(), rates.end());
  std::sort(cpu.begin(), cpu.end());
  // CPU seconds say how much work a run is, whatever else the shared machine is doing.
  std::printf("%-22s records=%-7zu median=%8.0f records/s  min=%8.0f  max=%8.0f  peak_rss=%6.1f MB  cpu=%.3f s  runs=%d\n",
              name, records, rates[rates.size() / 2], rates.front(), rates.back(), peak / 1024.0, cpu[cpu.size() / 2], runs);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t generated = 100000;
  std::string upstream = "../shared/upstream-gpu-wiki";
  int runs = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--records") generated = std::stoul(argv[i + 1]);
    else if (flag == "--upstream") upstream = argv[i + 1];
    else if (flag == "--runs") runs = std::stoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: index_bench [--records N] [--upstream DIR] [--runs K]\n");
      return 2;
    }
  }
  const std::string scratch = (fs::temp_directory_path() / ("kwiki-index-bench-" + std::to_string(getpid()))).string();
  fs::create_directories(scratch);
  std::printf("index_bench: %u hardware threads\n", std::max(1u, static_cast<unsigned>(sysconf(_SC_NPROCESSORS_ONLN))));
  if (fs::is_directory(upstream)) report("upstream-gpu-wiki", upstream, scratch, runs);
  else std::printf("upstream-gpu-wiki      skipped: %s not found\n", upstream.c_str());
  if (generated == 0) {  // --records 0: the foreign corpus only
    fs::remove_all(scratch);
    return 0;
  }
  const std::string generated_dir = scratch + "/generated";
  std::fprintf(stderr, "index_bench: generating %zu records...\n", generated);
  const std::size_t bytes = kwiki::bench::generate_corpus(generated_dir, generated);
  std::printf("generated corpus: %zu records, %.1f MB\n", generated, bytes / 1e6);
  report("generated", generated_dir, scratch, runs);
  fs::remove_all(scratch);
  return 0;
}
