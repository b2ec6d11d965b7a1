// build_index: validate every corpus root, write a new generation, switch to it atomically.
#include "kwiki/indexer.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include <xapian.h>

#include "corpus_walk.hpp"
#include "generation.hpp"
#include "kwiki/error.hpp"
#include "record_builder.hpp"
#include "schema_validator.hpp"
#include "store_writer.hpp"
#include "text_util.hpp"

#ifndef KWIKI_SOURCE_WIKI_DIR
#define KWIKI_SOURCE_WIKI_DIR ""
#endif
#ifndef KWIKI_INSTALL_WIKI_DIR
#define KWIKI_INSTALL_WIKI_DIR ""
#endif

namespace kwiki {
namespace fs = std::filesystem;
namespace {

using detail::RecordFile;

constexpr std::size_t kMaxReportedErrors = 50;

struct Fnv64 {
  std::uint64_t h = 1469598103934665603ULL;
  void add(std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ULL;
    }
    h ^= 0xff;  // field separator
    h *= 1099511628211ULL;
  }
  std::string hex() const {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
  }
};

std::string read_file(const RecordFile& file, std::size_t max_bytes) {
  if (file.size > max_bytes)
    throw Error(ErrorCode::kTooLarge,
                "record file is " + std::to_string(file.size) + " bytes, over the " + std::to_string(max_bytes) +
                    "-byte limit; split it or move bulky content out of the record",
                file.path);
  std::ifstream in(file.path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kUnreadable, "cannot open the file for reading; fix its permissions", file.path);
  std::string text(file.size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(file.size));
  if (in.gcount() != static_cast<std::streamsize>(file.size))
    throw Error(ErrorCode::kUnreadable, "the file changed size while being read", file.path);
  return text;
}

std::string absolute_or_same(const std::string& path) {
  std::error_code ec;
  auto abs = fs::absolute(path, ec);
  return ec ? path : abs.lexically_normal().string();
}

Diagnostic diagnostic_from(const Error& e) {
  return {e.file(), e.pointer(), e.what(), true, static_cast<int>(e.code())};
}


// Reads, validates and tokenizes records on worker threads, a bounded window ahead of the
// consumer, which takes results strictly in file order.
class RecordPipeline {
 public:
  struct Result {
    std::optional<detail::BuiltRecord> built;
    std::optional<Xapian::Document> document;
    std::vector<Diagnostic> warnings;
    std::exception_ptr failure;
  };

  RecordPipeline(const std::vector<RecordFile>& files, const detail::SchemaValidator& validator,
                 std::size_t max_bytes, bool make_documents)
      : files_(files), validator_(validator), max_bytes_(max_bytes), make_documents_(make_documents),
        slots_(files.size()), ready_(files.size(), 0) {
    const unsigned workers = std::max(1u, std::min(4u, std::thread::hardware_concurrency()));
    for (unsigned w = 0; w < workers; ++w) threads_.emplace_back([this] { work(); });
  }
  ~RecordPipeline() { stop(); }

  /// Blocks until record i is processed, then hands its result over.
  Result take(std::size_t i) {
    std::unique_lock lock(mutex_);
    awaited_ = i;
    done_cv_.wait(lock, [&] { return ready_[i] != 0; });
    awaited_ = kNoneAwaited;
    Result result = std::move(slots_[i]);
    consumed_ = i + 1;
    lock.unlock();
    room_cv_.notify_all();
    return result;
  }

  /// Stops the workers (idempotent).
  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    room_cv_.notify_all();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

 private:
  static constexpr std::size_t kWindow = 64;  // bounds memory: at most this many results wait

  void work() {
    Xapian::TermGenerator generator = detail::make_term_generator();
    for (;;) {
      const std::size_t i = next_.fetch_add(1);
      if (i >= files_.size()) return;
      {
        std::unique_lock lock(mutex_);
        room_cv_.wait(lock, [&] { return stopping_ || i < consumed_ + kWindow; });
        if (stopping_) return;
      }
      Result result;
      try {
        const RecordFile& file = files_[i];
        const std::string text = read_file(file, max_bytes_);
        detail::RecordLocation where{file.path, file.rel_path, file.root, file.source, file.internal};
        result.built = detail::build_record(validator_, text, where, result.warnings);
        if (make_documents_) result.document = detail::make_search_document(result.built->record, generator);
        if (result.built->record.body_text.size() > 0) {
          // The consumer never needs the search text again.
          std::string().swap(result.built->record.body_text);
          std::string().swap(result.built->record.title_text);
        }
      } catch (...) {
        result.failure = std::current_exception();
      }
      bool awaited = false;
      {
        std::lock_guard lock(mutex_);
        slots_[i] = std::move(result);
        ready_[i] = 1;
        awaited = i == awaited_;
      }
      // Only the record the consumer waits for wakes it; any other would wake it for nothing.
      if (awaited) done_cv_.notify_one();
    }
  }

  const std::vector<RecordFile>& files_;
  const detail::SchemaValidator& validator_;
  const std::size_t max_bytes_;
  const bool make_documents_;
  std::vector<Result> slots_;
  std::vector<char> ready_;
  std::atomic<std::size_t> next_{0};
  std::size_t consumed_ = 0;
  static constexpr std::size_t kNoneAwaited = static_cast<std::size_t>(-1);
  std::size_t awaited_ = kNoneAwaited;  // the record take() is blocked on
  bool stopping_ = false;
  std::mutex mutex_;
  std::condition_variable done_cv_, room_cv_;
  std::vector<std::thread> threads_;
};

}  // namespace

IndexReport build_index(const IndexOptions& options, std::vector<Diagnostic>* diagnostics_out) {
  const auto started = std::chrono::steady_clock::now();
  IndexReport report;
  if (options.wiki_roots.empty() && options.internal_roots.empty())
    throw Error(ErrorCode::kUsage, "no corpus root given: pass --wiki DIR (or --internal DIR)");

  // The record schemas compile on another core while the corpus is walked and fingerprinted.
  auto validator_ready = std::async(std::launch::async, [] { return std::make_unique<detail::SchemaValidator>(); });

  std::vector<RecordFile> files;
  std::vector<std::pair<std::string, std::string>> roots;  // (store, absolute root)
  auto walk = [&](const std::string& root, bool internal) {
    const std::string abs = absolute_or_same(root);
    auto found = detail::walk_corpus(abs, internal);
    roots.emplace_back(internal ? kInternalStore : kPublicStore, abs);
    files.insert(files.end(), std::make_move_iterator(found.begin()), std::make_move_iterator(found.end()));
  };
  for (const auto& root : options.wiki_roots) walk(root, false);
  for (const auto& root : options.internal_roots) walk(root, true);
  report.files = files.size();

  // The fingerprint covers what the generation is built from: layout version, schemas, and each
  // file's store, path, size and modification time.
  Fnv64 fingerprint;
  fingerprint.add("kwiki-store-" + std::to_string(detail::kStoreFormat));
  fingerprint.add(detail::SchemaValidator::schema_text("hw-1.0"));
  fingerprint.add(detail::SchemaValidator::schema_text("clean-1.3"));
  for (const auto& [store, root] : roots) fingerprint.add(store + ":" + root);
  if (options.shards > 1) fingerprint.add("shards=" + std::to_string(options.shards));
  for (const auto& f : files) {
    fingerprint.add(f.path);
    fingerprint.add(std::to_string(f.size) + ":" + std::to_string(f.mtime_ns));
  }

  std::unique_ptr<detail::WriterLock> lock;
  if (!options.check_only) {
    lock = std::make_unique<detail::WriterLock>(options.index_dir);
    if (!options.force) {
      if (auto current = detail::read_current_generation(options.index_dir)) {
        std::ifstream in(options.index_dir + "/" + *current + "/FINGERPRINT");
        std::string stored;
        std::getline(in, stored);
        if (stored == fingerprint.hex()) {
          report.generation = *current;
          report.records = 0;
          report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
          return report;
        }
      }
    }
  }

  const std::unique_ptr<detail::SchemaValidator> validator = validator_ready.get();
  std::string staging, generation_name;
  std::unique_ptr<detail::StoreWriter> writer;
  std::vector<Diagnostic> errors;
  std::vector<Diagnostic> warnings;
  std::unordered_map<std::string, std::string> key_to_path;
  struct Link {
    std::string file, id;
  };
  std::vector<Link> links;  // checked once every record is read
  key_to_path.reserve(files.size());
  // Workers read, validate and tokenize records ahead of this thread, which adds them to the
  // store in file order (so docids, and everything ranked by them, are deterministic). They
  // start before the staging generation exists: creating it is this thread's work meanwhile.
  RecordPipeline pipeline(files, *validator, options.max_record_bytes, !options.check_only);
  if (!options.check_only) {
    std::tie(staging, generation_name) = detail::create_staging_generation(options.index_dir);
    writer = std::make_unique<detail::StoreWriter>(staging, options.shards);
  }
  try {
    for (std::size_t i = 0; i < files.size(); ++i) {
      const RecordFile& file = files[i];
      if (options.progress && (i % 256 == 0 || i + 1 == files.size())) options.progress(i + 1, files.size());
      RecordPipeline::Result result = pipeline.take(i);
      try {
        if (result.failure) std::rethrow_exception(result.failure);
        detail::BuiltRecord& built = *result.built;
        auto [it, inserted] = key_to_path.emplace(built.record.key, file.path);
        if (!inserted)
          throw Error(ErrorCode::kDuplicateId, "duplicate id \"" + built.record.id + "\", also in " + it->second +
                                                   "; give one of them a new id", file.path, "/id");
        for (auto& w : result.warnings) {
          if (writer) writer->add_warning(w);
          warnings.push_back(std::move(w));
        }
        for (const auto& link : built.record.links) links.push_back({file.path, link});
        if (writer && errors.empty()) writer->add(built.record, std::move(*result.document), built.facts);
        ++report.by_store[built.record.store];
        ++report.records;
      } catch (const Error& e) {
        if (e.code() == ErrorCode::kIo || e.code() == ErrorCode::kInternal) throw;
        errors.push_back(diagnostic_from(e));
        if (errors.size() >= kMaxReportedErrors) break;
      }
    }
    pipeline.stop();
    // A link names an id some record has (public, or private with its prefix).
    for (const auto& l : links) {
      if (key_to_path.contains(l.id) || key_to_path.contains(std::string(kInternalPrefix) + l.id)) continue;
      Diagnostic w{l.file, "", "links to \"" + l.id + "\", which no record has; fix the id or drop the link"};
      if (writer) writer->add_warning(w);
      warnings.push_back(std::move(w));
    }
    if (options.strict && errors.empty()) {
      for (const auto& w : warnings) {
        Diagnostic d = w;
        d.error = true;
        d.code = static_cast<int>(ErrorCode::kConsistency);
        errors.push_back(std::move(d));
      }
    }
    report.diagnostics = warnings;
    if (!errors.empty()) {
      if (diagnostics_out) {
        *diagnostics_out = errors;
        diagnostics_out->insert(diagnostics_out->end(), warnings.begin(), warnings.end());
      }
      const Diagnostic& first = errors.front();
      std::string message = first.message;
      if (errors.size() > 1) message += " (and " + std::to_string(errors.size() - 1) + " more problem(s))";
      throw Error(static_cast<ErrorCode>(first.code), message, first.file, first.pointer);
    }
    if (writer) {
      std::map<std::string, std::string> meta = {
          {"generation", generation_name},
          {"created_at", detail::now_iso8601()},
          {"fingerprint", fingerprint.hex()},
          {"store_format", std::to_string(detail::kStoreFormat)},
          {"records", std::to_string(report.records)},
          {"warnings", std::to_string(warnings.size())},
      };
      writer->finish(meta, roots);
      writer.reset();
      {
        std::ofstream out(staging + "/FINGERPRINT");
        out << fingerprint.hex() << "\n";
      }
      // Test hook: simulate a crash between a complete staging generation and the switch.
      if (const char* fail = std::getenv("KWIKI_TEST_FAIL_BEFORE_SWITCH"); fail && *fail == '1')
        throw Error(ErrorCode::kIo, "injected failure before the generation switch (KWIKI_TEST_FAIL_BEFORE_SWITCH)");
      detail::publish_generation(options.index_dir, staging, generation_name);
      report.generation = generation_name;
      report.rebuilt = true;
    }
  } catch (...) {
    pipeline.stop();
    writer.reset();
    if (!staging.empty()) detail::remove_tree_quietly(staging);
    throw;
  }
  if (!options.check_only && !report.generation.empty())
    report.shard_dirs = detail::shard_dirs(options.index_dir + "/" + report.generation);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

std::string bundled_wiki_dir() {
  auto is_corpus = [](const std::string& dir) {
    std::error_code ec;
    return !dir.empty() && (fs::is_directory(dir + "/hardware_wiki/records", ec) || fs::is_directory(dir + "/kernel_wiki/records", ec));
  };
  if (const char* env = std::getenv("KWIKI_BUNDLED_WIKI"); env && *env) return env;
  // Installed layout: <prefix>/bin/kwiki next to <prefix>/share/kwiki/gpu-wiki.
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::string relative = (exe.parent_path().parent_path() / "share/kwiki/gpu-wiki").string();
    if (is_corpus(relative)) return relative;
  }
  if (is_corpus(KWIKI_INSTALL_WIKI_DIR)) return KWIKI_INSTALL_WIKI_DIR;
  if (is_corpus(KWIKI_SOURCE_WIKI_DIR)) return KWIKI_SOURCE_WIKI_DIR;
  return {};
}

std::string resolve_index_dir(const std::string& cli_value) {
  if (!cli_value.empty()) return absolute_or_same(cli_value);
  if (const char* env = std::getenv("KWIKI_INDEX"); env && *env) return absolute_or_same(env);
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache && *cache) return std::string(cache) + "/kwiki/index";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/kwiki/index";
  return absolute_or_same(".kwiki-index");
}

std::string current_generation(const std::string& index_dir) { return detail::read_current_generation(index_dir).value_or(""); }

bool ensure_index(const std::string& index_dir) {
  const detail::CurrentPointer pointer = detail::read_current_pointer(index_dir);
  if (pointer.state == detail::CurrentPointer::State::kValid) return false;
  // Only a folder with no index at all is built; a damaged one is reported, never replaced.
  if (pointer.state == detail::CurrentPointer::State::kDamaged || !detail::published_generations(index_dir).empty())
    detail::serving_generation(index_dir);  // throws kIndexCorrupt with what to run
  const std::string wiki = bundled_wiki_dir();
  if (wiki.empty())
    throw Error(ErrorCode::kIndexMissing,
                "no index here and no bundled gpu-wiki found; run `kwiki index --wiki DIR --index " + index_dir + "`",
                index_dir);
  std::fprintf(stderr, "kwiki: no index at %s; building it from the bundled gpu-wiki (%s)\n", index_dir.c_str(), wiki.c_str());
  IndexOptions options;
  options.wiki_roots = {wiki};
  options.index_dir = index_dir;
  build_index(options);
  return true;
}

nlohmann::ordered_json index_report_json(const IndexOptions& options, const IndexReport& report) {
  nlohmann::ordered_json j;
  j["mode"] = options.check_only ? "check" : "index";
  j["index"] = options.check_only ? "" : options.index_dir;
  j["generation"] = report.generation;
  j["rebuilt"] = report.rebuilt;
  j["unchanged"] = !options.check_only && !report.rebuilt;
  j["files"] = report.files;
  j["records"] = report.records;
  j["warnings"] = report.diagnostics.size();
  j["by_store"] = report.by_store;
  j["seconds"] = report.seconds;
  // Shard folders, for xapian-tcpsrv on the hosts that will serve them.
  if (!report.shard_dirs.empty()) j["shards"] = report.shard_dirs;
  return j;
}

}  // namespace kwiki
