// Coverage: whether the corpus has a record about the request, or only records near it.
#include "coverage.hpp"

namespace kwiki::detail {

Coverage assess_coverage(const Intent& intent, const std::vector<Candidate>& ranked, bool answered_exactly) {
  Coverage out;
  const bool asks_content = !intent.free_terms.empty() || !intent.operators.empty() || !intent.symptoms.empty() || !intent.mnemonics.empty();
  if (answered_exactly || !asks_content) return out;
  for (std::size_t i = 0; i < ranked.size() && i < kCoverageLeaders; ++i)
    if (ranked[i].evidence.any()) return out;
  out.covered = false;
  std::string asked;
  for (const auto* list : {&intent.operators, &intent.symptoms, &intent.mnemonics, &intent.free_terms})
    for (const auto& word : *list) asked += (asked.empty() ? "" : " ") + word;
  out.note = "not covered: nothing here is about \"" + asked + "\"";
  if (ranked.empty()) {
    out.note += "; nothing near it either";
    return out;
  }
  out.note += "; nearest, sharing words only:";
  for (std::size_t i = 0; i < ranked.size() && i < kCoverageLeaders; ++i) out.note += (i ? ", " : " ") + ranked[i].key;
  return out;
}

}  // namespace kwiki::detail
