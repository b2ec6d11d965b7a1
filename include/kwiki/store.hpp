// Read access to the serving index generation: records by id, hardware facts, statistics.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kwiki/record.hpp"

struct sqlite3;

namespace kwiki {

/// Counts shown by `kwiki stats`.
struct StoreStats {
  std::string generation;
  std::string created_at;
  std::size_t records = 0;
  std::size_t warnings = 0;
  std::map<std::string, std::size_t> by_store, by_type, by_vendor, by_arch, by_source;
  /// Topics per architecture: architecture -> operator family -> records.
  std::map<std::string, std::map<std::string, std::size_t>> topics_by_arch;
  struct Root {
    std::string store, path;
    std::size_t records = 0;
  };
  std::vector<Root> roots;
  std::vector<std::string> shard_dirs;  ///< full-text shard folders when built with --shards N
};

/// An open, read-only view of one generation. It keeps serving that generation even when a
/// newer one is published. Thread-compatible: use one Store per thread.
class Store {
 public:
  /// Opens the serving generation of `index_dir`. Throws kwiki::Error kIndexMissing when there
  /// is none, kIndexCorrupt when it cannot be read.
  static Store open(const std::string& index_dir);

  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;
  ~Store();

  /// A record by key ("id" or "internal_gpu_wiki::id"); a bare id also finds a private record
  /// when no public one has it. nullopt when unknown.
  std::optional<Record> get(std::string_view key) const;
  /// Hardware facts of a record, by key, in path order.
  std::vector<HardwareFact> facts(std::string_view key) const;
  /// Counts by store, type, vendor, architecture; roots; the generation.
  StoreStats stats() const;
  /// The deep integrity check (`kwiki stats`, `kwiki index --check`): SQLite quick_check, every
  /// record's checksum, every full-text file against its manifest, Xapian's own check. Returns
  /// the problems found; empty means intact. Reads every file of the generation once.
  std::vector<std::string> check_integrity() const;
  /// The generation folder (holds store.sqlite and xapian/).
  const std::string& generation_dir() const;
  /// The generation's name, e.g. gen-000002.
  const std::string& generation() const;
  /// The underlying SQLite connection, for components layered on the store.
  ::sqlite3* sqlite() const;

 private:
  struct Impl;
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kwiki
