// The proof: which family's CPU twin reproduces the reference on every traced shape.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "family.hpp"
#include "generator/generator.hpp"
#include "trace.hpp"

namespace kwiki::detail {

/// How one family fared against the reference.
struct FamilyVerdict {
  std::string family;
  bool fits = false;     ///< its interface fits the reference's tensors on every shape
  bool proven = false;   ///< its twin matched the reference on every shape
  std::string why;       ///< what does not fit, or which output differs and by how much
  double worst_abs = 0;  ///< the largest absolute error of its best binding (fits only)
  nlohmann::json binding;  ///< its best binding on the first shape
};

/// The outcome of the proof.
struct ProofResult {
  bool ran = false;               ///< the twins were run against the reference
  std::string not_run_because;    ///< why not (no torch, no compiler, the reference failed)
  const FamilyRow* chosen = nullptr;  ///< the proven family (nullptr: none)
  nlohmann::json binding;         ///< the chosen family's binding: roles, params, outputs
  std::vector<FamilyVerdict> verdicts;  ///< per family tried, in table order
  std::vector<std::string> shapes;      ///< the shapes it was checked on
  std::string near_miss;          ///< the closest family that failed, and why (none chosen)
  /// As plans/proof.json keeps it.
  nlohmann::ordered_json to_json() const;
};

/// Decides from the trace: a family is chosen only when its twin matched the reference on every
/// traced shape with one and the same binding of roles. `only` restricts it to one family (the
/// user's --pattern); `guess` (the source-text pattern, for naming a near miss) may be "".
/// `generated` is the generator's outcome (the "generated" row's verdict), or nullptr when it did not run.
ProofResult decide_family(const Trace& trace, const std::string& only, const std::string& guess, const gen::Generation* generated = nullptr);

}  // namespace kwiki::detail
