// Writes one index generation: the SQLite structured store and the Xapian full-text database.
#pragma once

#include <exception>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <xapian.h>

#include "file_util.hpp"
#include "kwiki/indexer.hpp"
#include "kwiki/record.hpp"

namespace kwiki::detail {

/// File names inside a generation folder.
inline constexpr const char* kStoreFile = "store.sqlite";
/// The full-text database: a Xapian folder, or with shards a Xapian stub file listing
/// "auto xapian-shard-K" lines (Xapian opens either the same way).
inline constexpr const char* kXapianDir = "xapian";
/// Shard K lives in this folder next to the stub.
inline std::string shard_dir_name(std::size_t k) { return "xapian-shard-" + std::to_string(k); }
/// The shard folders of a generation, in order (empty when it is not sharded).
std::vector<std::string> shard_dirs(const std::string& generation_dir);
/// Xapian metadata keys each shard carries, checked by readers that open shards one by one.
inline constexpr const char* kShardKey = "kwiki:shard";              ///< "K/N"
inline constexpr const char* kFingerprintKey = "kwiki:fingerprint";  ///< the generation's corpus fingerprint
/// Version of the on-disk layout; bump when the store schema changes.
inline constexpr int kStoreFormat = 6;

/// The integrity check of a stored record (its key and payload bytes), written by the writer
/// and verified by every Store::get: a damaged page is an error, never a garbled answer.
inline std::uint64_t record_checksum(std::string_view key, std::string_view payload) { return hash64(payload, hash64(key)); }

/// Xapian boolean term prefixes and value slots, shared by the writer and the query engine.
namespace term {
inline constexpr const char* kId = "Q";
inline constexpr const char* kType = "XT";
inline constexpr const char* kVendor = "XV";
inline constexpr const char* kArch = "XA";
inline constexpr const char* kDsl = "XD";
inline constexpr const char* kOperator = "XO";
inline constexpr const char* kSymptom = "XS";
inline constexpr const char* kTag = "XK";
inline constexpr const char* kProduct = "XP";
inline constexpr const char* kWorkload = "XW";
inline constexpr const char* kStore = "XR";
inline constexpr const char* kSource = "XC";
inline constexpr unsigned kSlotKey = 0;
inline constexpr unsigned kSlotWorth = 1;
inline constexpr unsigned kSlotHit = 2;  ///< encode_search_data(): what the ranker reads per hit
}  // namespace term

/// Makes the search document of a record (terms, values). Thread-safe when each thread
/// passes its own generator; the result is handed to StoreWriter::add.
Xapian::Document make_search_document(const Record& record, Xapian::TermGenerator& generator);

/// The document data of a search hit: key, type, vendor, arch, dsl, products, operators,
/// symptoms, tags, store, links; tab-separated, lists comma-separated.
std::string encode_search_data(const Record& record);

/// A term generator configured the way the index expects (English stemming, no positions).
Xapian::TermGenerator make_term_generator();

/// Accumulates records into a new generation folder. Not thread-safe.
class StoreWriter {
 public:
  /// Creates the store files inside `generation_dir` (which must exist and be empty).
  /// With `shards` > 1 the full text is split into that many Xapian databases plus a stub.
  explicit StoreWriter(const std::string& generation_dir, std::size_t shards = 1);
  ~StoreWriter();

  /// Adds one record, its search document and its hardware facts. The document is handed to
  /// the writer's full-text thread (pass it moved, no other handle on it may remain); throws the
  /// full-text thread's failure, if it had one, as kwiki::Error.
  void add(const Record& record, Xapian::Document document, const std::vector<HardwareFact>& facts);
  /// Records a validation warning so `kwiki stats` can show it.
  void add_warning(const Diagnostic& warning);
  /// Writes metadata, indexes, commits and syncs everything to disk. `meta` must hold
  /// "fingerprint"; each shard records it with its position (kShardKey, kFingerprintKey).
  void finish(const std::map<std::string, std::string>& meta,
              const std::vector<std::pair<std::string, std::string>>& roots_by_store);

 private:
  /// Metadata, indexes, commit, close and sync of the SQLite store.
  void finish_store(const std::map<std::string, std::string>& meta,
                    const std::vector<std::pair<std::string, std::string>>& roots_by_store);
  /// Commits and closes the Xapian databases (and writes the shard stub); returns the files written.
  std::vector<std::string> finish_full_text(const std::map<std::string, std::string>& meta);
  /// The full-text thread: adds queued documents in order, then commits when finish() asks.
  void write_full_text();
  /// Records the full-text thread's first failure and drops what is still queued.
  void fail_full_text(std::exception_ptr failure);
  /// Lets the full-text thread run out: with `commit_meta` it adds what is queued and commits,
  /// without it what is queued is dropped (idempotent).
  void close_full_text_queue(const std::map<std::string, std::string>* commit_meta);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kwiki::detail
