// Public API of the indexer: validate corpus roots and build a new index generation.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kwiki {

/// A finding about one record: an error refuses the corpus, a warning is reported only.
struct Diagnostic {
  std::string file;     ///< path of the record file
  std::string pointer;  ///< JSON pointer inside it, or empty
  std::string message;  ///< what is wrong and what to do
  bool error = false;
  int code = 0;         ///< ErrorCode number for errors
};

/// What `build_index` should do.
struct IndexOptions {
  std::vector<std::string> wiki_roots;      ///< public corpus roots (gpu_wiki store)
  std::vector<std::string> internal_roots;  ///< private corpus roots (internal_gpu_wiki store)
  std::string index_dir;                    ///< where generations live
  bool check_only = false;                  ///< validate, write nothing
  bool strict = false;                      ///< warnings count as errors
  bool force = false;                       ///< rebuild even when the corpus is unchanged
  std::size_t max_record_bytes = 16u << 20; ///< larger record files are refused
  /// Full-text shards (1 = one database). Records are dealt round-robin in corpus order, so the
  /// combined document ids, and hence every answer, equal the single database's.
  std::size_t shards = 1;
  /// Called now and then with (records done, records total); may be empty.
  std::function<void(std::size_t, std::size_t)> progress;
};

/// The outcome of `build_index`.
struct IndexReport {
  std::size_t files = 0;             ///< record files read
  std::size_t records = 0;           ///< records accepted
  std::vector<Diagnostic> diagnostics;  ///< warnings (and errors when it threw)
  std::string generation;            ///< the serving generation afterwards
  bool rebuilt = false;              ///< false when unchanged or check-only
  double seconds = 0;                ///< wall time
  std::map<std::string, std::size_t> by_store;  ///< records per store
  std::vector<std::string> shard_dirs;  ///< the serving generation's full-text shard folders, when sharded
};

/// Validates every record under the roots, then (unless check_only) writes a new generation
/// and switches to it atomically. Throws kwiki::Error on the first refusing problem, after
/// filling `diagnostics_out` (when not null) with every problem found; the serving generation
/// is untouched then. Not thread-safe for one index_dir: a file lock serializes writers.
IndexReport build_index(const IndexOptions& options, std::vector<Diagnostic>* diagnostics_out = nullptr);

/// An index run as its callers (CLI --json, C API) return it: mode (index | check), index folder
/// (empty for a check), generation, rebuilt, unchanged, files, records, warnings (the count),
/// records by store, seconds, and the shard folders when sharded. Never throws.
nlohmann::ordered_json index_report_json(const IndexOptions& options, const IndexReport& report);

/// The bundled gpu-wiki: $KWIKI_BUNDLED_WIKI, else the installed share/kwiki/gpu-wiki, else the
/// source tree it was built from. Empty when none exists.
std::string bundled_wiki_dir();

/// --index value, else $KWIKI_INDEX, else $XDG_CACHE_HOME/kwiki/index, else ~/.cache/kwiki/index.
std::string resolve_index_dir(const std::string& cli_value);

/// Builds the index from the bundled gpu-wiki when `index_dir` holds no index at all, saying
/// so on stderr. Returns true when it built one. A folder whose CURRENT pointer is damaged (or
/// missing beside generations) is never rebuilt or cleaned: kwiki::Error kIndexCorrupt says what
/// to run. Throws kwiki::Error when it cannot build.
bool ensure_index(const std::string& index_dir);

/// The generation CURRENT names ("gen-000003"), or "" when it names none. One small read: a
/// long-lived server calls it between requests to notice a new generation.
std::string current_generation(const std::string& index_dir);

}  // namespace kwiki
