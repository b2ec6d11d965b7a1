// Kernel-knowledge retrieval: BM25 over the Xapian index inside the scope, staged widening, rerank.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kwiki/intent.hpp"
#include "lexicon.hpp"
#include "shards.hpp"

namespace kwiki::detail {

/// One retrieved record with its rank features.
struct Candidate {
  std::string key;
  std::string type;
  std::string match_arch;          ///< exact | architecture-neutral | other-architecture | fallback
  std::vector<std::string> why;
  double bm25 = 0;
  double score = 0;
  int stage = 0;
  std::size_t hit = 0;             ///< position of its hit in the ranked pool
  nlohmann::ordered_json explain;  ///< score parts
};

/// Searches one generation's full-text index. Not thread-safe.
class Retriever {
 public:
  /// Opens <generation>/xapian. Throws kwiki::Error kIndexCorrupt.
  explicit Retriever(const std::string& xapian_dir);
  /// Searches shards opened elsewhere; a shard failing mid-search becomes an error naming it.
  explicit Retriever(std::unique_ptr<ShardSet> shards);
  ~Retriever();

  /// True when the (unstemmed) word occurs in the index after stemming.
  bool knows_word(const std::string& word);

  /// Up to `want` records in rank order. `worth_adjust` maps keys to feedback adjustments.
  /// Appends scope, widening and spelling notes to `notes`; stage descriptions to `stages`.
  /// Score parts are recorded in Candidate::explain only when `explain` is set.
  std::vector<Candidate> retrieve(const Intent& intent, std::size_t want, const std::map<std::string, double>& worth_adjust,
                                  std::vector<std::string>& notes, nlohmann::ordered_json& stages, bool explain = false);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kwiki::detail
