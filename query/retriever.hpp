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

/// What a record has in common with the request beyond words (coverage reads it).
struct Evidence {
  bool operator_match = false;     ///< an operator the request names is one of the record's
  bool symptom = false;            ///< a symptom of the request is one of the record's
  bool instruction = false;        ///< an instruction the request names is the record's
  /// A word or word pair of the request is one of the record's tags, or the record holds the
  /// request's words carrying most of their weight (RankWeights::topic_share). Marked on the
  /// leading records, and only when none of them shares an operator, symptom or instruction
  /// (or with --explain).
  bool topic = false;
  bool any() const { return operator_match || symptom || instruction || topic; }
};

/// Topics are marked on this many leading candidates (coverage reads no further).
inline constexpr std::size_t kCoverageLeaders = 3;

/// One retrieved record with its rank features.
struct Candidate {
  std::string key;
  std::string type;
  std::string match_arch;          ///< exact | architecture-neutral | other-architecture | fallback
  std::vector<std::string> why;
  Evidence evidence;
  double bm25 = 0;
  double score = 0;
  int stage = 0;
  std::size_t hit = 0;             ///< position of its hit in the ranked pool
  nlohmann::ordered_json explain;  ///< score parts
};

/// What a retrieval is asked for.
struct RetrieveRequest {
  const Intent& intent;
  std::size_t want = 20;                             ///< at most this many candidates
  const std::map<std::string, double>* worth_adjust = nullptr;  ///< feedback adjustments by key
  bool explain = false;                              ///< record score parts in Candidate::explain
};

/// What a retrieval found, and how it went.
struct Retrieval {
  std::vector<Candidate> candidates;  ///< rank order
  std::vector<std::string> notes;     ///< scope, widening, links followed
  nlohmann::ordered_json stages = nlohmann::ordered_json::array();  ///< per search stage: name, matches, added
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

  /// Ranked records for an intent, in stages: search (the named operators, then the whole
  /// scope, widened to other architectures of the vendor last), score (text part plus the
  /// RankWeights label parts), feedback (shared tags, links), shape (architectures spread and
  /// each named one shown). Throws kwiki::Error kIndexCorrupt / kShardUnavailable.
  Retrieval retrieve(const RetrieveRequest& request);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kwiki::detail
