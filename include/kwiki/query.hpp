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
  bool brief = false;             ///< elide long payload fields (listed in payload.omitted_by_brief)
  std::size_t max_bytes = 0;      ///< hard limit on the serialized answer; 0 = none
  std::size_t max_records = 20;   ///< at most this many records
  bool explain = false;           ///< add the intent and score parts under "explain"
  bool log = true;                ///< record the query in the index's query log
};

/// The outcome of a query: the answer, its JSON and the CLI exit status (0, 1 or 3).
struct QueryResult {
  Answer answer;
  std::string json;
  int exit_code = 0;
};

/// One hardware fact as answered: exact value with its provenance.
struct FactAnswer {
  std::string product;
  std::string record;    ///< spec sheet id
  std::string field;     ///< dot path
  nlohmann::ordered_json value;
  std::string unit;
  std::string evidence;  ///< evidence class
  nlohmann::ordered_json sources;  ///< the record's sources
  std::string derivation;          ///< for computed fields (ridge point)
};

/// Resolves products and answers hardware facts exactly. Part of QueryEngine.
struct HardwareAnswer {
  Answer answer;                 ///< spec sheets (and measured ceilings) as records
  std::vector<FactAnswer> facts; ///< requested fields (all numeric fields when none named)
  nlohmann::ordered_json comparison;  ///< --vs: field, a, b, ratio
  int exit_code = 0;             ///< 0 found, 3 not recorded
  std::string json;
};

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

  /// Exact hardware lookup: product spelling, optional field path, optional second product.
  HardwareAnswer hardware(const std::string& product, const std::string& field = {}, const std::string& vs = {});

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
