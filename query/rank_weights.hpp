// The weights of kernel-knowledge ranking, in one place: search terms, score parts, feedback.
#pragma once

#include <cstddef>

namespace kwiki::detail {

/// Every number the retriever ranks by. A record's score is its text part (BM25 over the
/// pool's best) plus the label parts below; then relevance feedback re-ranks the pool.
struct RankWeights {
  // ---- search terms: how much each kind of request word weighs in the BM25 query ----
  double free_term = 1.0;       ///< a content word of the request
  double synonym_term = 0.35;   ///< a lexicon synonym of a content word
  double operator_term = 1.5;   ///< the words of a named operator family
  double symptom_term = 1.2;    ///< the words of a symptom label
  double mnemonic_term = 2.0;   ///< an ISA mnemonic
  double dsl_term = 0.6;        ///< a framework name
  double dtype_term = 0.9;      ///< a dtype
  double hardware_term = 0.4;   ///< the words of a requested hardware field

  // ---- text part ----
  /// The text part is BM25 over the pool's best, but never over less than this times
  /// ln(records): about one rare word fully matched. A request with almost no words beyond its
  /// labels ("how many SMs on an H100 PCIe card") then lets its labels rank, instead of
  /// crowning whichever record best matches "card".
  double text_evidence = 1.5;

  // ---- label parts: added to the text part ----
  double arch_exact = 0.15;           ///< a record of an architecture the request names
  /// A record of another architecture of the request's vendor (reached through a link or the
  /// last widening): ranked below an exact or neutral record of the same strength.
  double other_architecture = -0.10;
  double primary_operator = 0.35;     ///< the first operator named is one of the record's
  double named_operator = 0.12;       ///< another named operator is one of the record's
  double other_operator = -0.20;      ///< the record is tied to operators the request does not name
  double symptom = 0.20;              ///< a symptom of the request is one of the record's
  double measured_symptom = 0.45;     ///< ... and a measured number backs it: the request is about it
  double dsl = 0.30;                  ///< the record is in a framework the request names
  double other_dsl = -0.15;           ///< the record is in another (not "any") framework
  double intent_type = 0.20;          ///< the record's type serves the request's intent (pitfall -> anti-strategy)
  double hardware_use = 0.25;         ///< a pure hardware request: the record uses the numbers asked for
  double product = 0.10;              ///< the record is for a product the request names
  double mnemonic = 0.40;             ///< the record is about an instruction the request names
  double worth_scale = 0.10;          ///< times (worth - 0.5): the record's prior
  double worth_limit = 0.15;          ///< the prior with feedback adjustments stays within +-this

  // ---- relevance feedback: the leading records' technique tags ----
  std::size_t feedback_records = 3;   ///< the leading records whose tags count
  double shared_tag = 0.10;           ///< per shared tag of idf weight 1
  double shared_tag_cap = 3.0;        ///< at most this much idf weight counts

  // ---- link feedback: what the leading records' authors would read next ----
  std::size_t link_voters = 2;        ///< the first records vote for the records they link to
  double link_vote = 0.4;             ///< a voter's vote for a record it links to, over its rank
  double back_link_vote = 0.1;        ///< ... for a record that links to the voter
  std::size_t linked_place = 6;       ///< 1-based rank the leader's links still below it move up to
  std::size_t linked_places = 3;      ///< at most this many are moved

  // ---- coverage ----
  /// A leading record holding the request's words that carry at least this share of their idf
  /// weight is about the request (a topic in common), not merely near it.
  double topic_share = 0.5;

  // ---- answer shape ----
  std::size_t each_architecture_place = 3;  ///< with several architectures named, each one's best is at most here
  std::size_t min_depth = 30;         ///< candidates fetched per search stage: 2 x wanted, within these
  std::size_t max_depth = 200;
  /// A narrower stage whose matches are this many times the depth, with the pool full, stops
  /// the widening (1M-record corpora; never on gpu-wiki).
  std::size_t saturation = 10;
};

/// The weights kwiki ranks with.
inline constexpr RankWeights kRankWeights{};

}  // namespace kwiki::detail
