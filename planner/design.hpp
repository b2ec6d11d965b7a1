// The V0 design of a pattern on a target, each choice backed by the wiki record behind it.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kwiki/planner.hpp"
#include "kwiki/query.hpp"
#include "target.hpp"

namespace kwiki::detail {

/// A record consulted, with the query that served it and what it was consulted for.
struct Consulted {
  std::string record, query_id, aspect;
};

/// One design decision and the record that set it.
struct DesignChoice {
  std::string aspect, choice, record;
};

/// The V0 design.
struct Design {
  std::string template_name;  ///< baseline template (pattern + target family)
  std::vector<DesignChoice> choices;
  std::vector<std::string> isa_targets;  ///< "what to look for later", each "<target> <- <record>"
  std::vector<std::string> correctness;  ///< tolerance lines with their records
  std::vector<std::string> boundary_cases;
  std::vector<std::string> measurement;
  std::vector<std::string> risks;
  std::vector<Consulted> consulted;
};

/// Designs V0 for `pattern` on `target`, consulting the wiki through `engine` (queries logged,
/// so their ids can be cited and given feedback). Unknown patterns get the records their words
/// find and no template.
Design design_v0(QueryEngine& engine, const std::string& pattern, const Task& task, const TargetInfo& target,
                 const std::vector<std::string>& operator_words);

}  // namespace kwiki::detail
