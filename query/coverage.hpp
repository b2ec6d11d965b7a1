// Coverage: whether the corpus has a record about the request, or only records near it.
#pragma once

#include <string>
#include <vector>

#include "kwiki/intent.hpp"
#include "retriever.hpp"

namespace kwiki::detail {

/// The verdict on a request the knowledge records were searched for.
struct Coverage {
  bool covered = true;
  std::string note;  ///< not covered: what the request asks that no record is about, and what is nearest
};

/// A request is covered when one of its leading candidates (the first kCoverageLeaders) has
/// evidence in common with it: an operator, a symptom, an instruction or a topic (Evidence).
/// A request that asks nothing beyond products, architectures, frameworks, dtypes, intents or
/// hardware numbers is about those and covered by the records of their scope; so is one whose
/// hardware facts or spec sheets were answered (`answered_exactly`). Otherwise the leading
/// records share only words or the architecture with the request, and the note names them as
/// the nearest the corpus has.
Coverage assess_coverage(const Intent& intent, const std::vector<Candidate>& ranked, bool answered_exactly);

}  // namespace kwiki::detail
