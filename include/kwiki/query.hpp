// Public API of kwiki query: answers, hardware lookups and feedback over one index.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kwiki/answer.hpp"
#include "kwiki/intent.hpp"
#include "kwiki/store.hpp"

namespace kwiki {

/// Options of a query (the CLI flags of `kwiki query`).
struct QueryOptions {
  /// The brief form: per record its id, type, match label, title, what to do, why and citation;
  /// facts without their sources (see `sources`). The whole records are a `kwiki get` away.
  bool brief = false;
  /// A hard limit on the serialized answer, spent on content in rank order: facts, then records
  /// in the brief form, then (unless `brief`) longer fields of the top records. The envelope and
  /// the list of dropped ids take at most a tenth of it. 0 = none.
  std::size_t max_bytes = 0;
  /// At most this many records; 0 = the default (kDefaultRecords, or kDefaultBriefRecords in the
  /// brief form).
  std::size_t max_records = 0;
  bool sources = false;  ///< brief form: facts carry their sources too
  bool explain = false;  ///< add the intent and score parts under "explain"
  bool log = true;       ///< record the query in the index's query log
};

/// Records in an answer when QueryOptions::max_records is 0.
inline constexpr std::size_t kDefaultRecords = 20;
inline constexpr std::size_t kDefaultBriefRecords = 8;

/// Options of a hardware lookup (`kwiki hw`).
struct HardwareOptions {
  std::string field;  ///< a dot path (peak_compute.bf16.dense), a group (memory), "roofline"; "" = the main numbers
  std::string vs;     ///< a second product: both values and the ratio for every shared numeric field
  bool brief = false; ///< spec sheets in the brief form; facts then carry sources only when `sources`
  bool sources = true;
};

/// The outcome of a query, lookup or get: the answer, its JSON and the CLI exit status (0 answer,
/// 1 nothing found or the request not covered, 3 not recorded).
struct QueryResult {
  Answer answer;
  std::string json;
  int exit_code = 0;
};

/// A hardware lookup's outcome: facts in answer.facts, spec sheets (and measured ceilings) as
/// records, --vs rows in answer.comparison; exit 0 found, 3 not recorded.
using HardwareAnswer = QueryResult;

/// Where QueryEngine::open finds the full-text index.
struct OpenOptions {
  /// Shards served elsewhere instead of the index's own full text: comma-separated HOST:PORT
  /// (xapian-tcpsrv), shard folders or Xapian stub files, every shard of the generation once,
  /// in any order. The SQLite store and the lexicon stay local. Empty: the local full text.
  std::string shards;
  /// A remote shard that does not answer within this time is an error naming it, not a hang.
  unsigned remote_timeout_ms = 10000;
};

/// Answers requests against one index generation. Not thread-safe: one engine per thread.
class QueryEngine {
 public:
  /// Opens the serving generation of `index_dir`. Throws kwiki::Error kIndexMissing/kIndexCorrupt,
  /// and kShardUnavailable when a shard in `options` cannot be reached or is not this generation's.
  static QueryEngine open(const std::string& index_dir, const OpenOptions& options = {});
  QueryEngine(QueryEngine&&) noexcept;
  QueryEngine& operator=(QueryEngine&&) noexcept;
  ~QueryEngine();

  /// Answers a natural-language request (or a replayed upstream intent when `intent` is set).
  /// Deterministic for the same request, options and generation. Throws kwiki::Error kUsage for
  /// impossible options (max_bytes below the smallest answer).
  QueryResult query(const std::string& text, const QueryOptions& options,
                    const std::optional<nlohmann::json>& upstream_intent = std::nullopt);

  /// Exact hardware lookup: a product spelling and the options. Never guesses a sibling product.
  HardwareAnswer hardware(const std::string& product, const HardwareOptions& options = {});

  /// Records by id ("id" or "internal_gpu_wiki::id"), in the order asked, each once (a repeated
  /// id is served once and the notes say so); unknown ids are named in the notes. Full form:
  /// payloads byte-identical to the stored files. Exit 0, or 1 when none is known.
  QueryResult get(const std::vector<std::string>& ids) const;

  /// Records an outcome for a served record of a logged query. Throws kwiki::Error kBadInput for
  /// an unknown query id, record or outcome.
  void feedback(const std::string& query_id, const std::string& record_id, const std::string& outcome);

  /// The store underneath (records by id, stats).
  const Store& store() const;

 private:
  struct Impl;
  explicit QueryEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kwiki
