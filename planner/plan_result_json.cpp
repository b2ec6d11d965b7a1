// The account of a plan an agent reads: family, confidence, proof, SOL per shape, cited ids.
#include "kwiki/planner.hpp"

#include <cmath>
#include <set>

namespace kwiki {
namespace {

using ordered_json = nlohmann::ordered_json;

// Microseconds to four significant figures (the plan file keeps every digit).
ordered_json micros(const ordered_json& v) {
  if (!v.is_number()) return v;
  const double x = v.get<double>();
  if (x == 0 || !std::isfinite(x)) return v;
  const double scale = std::pow(10.0, 3 - std::floor(std::log10(std::fabs(x))));
  return std::round(x * scale) / scale;
}

// A member of the plan, or null when an older or partial plan lacks it.
const ordered_json& member(const ordered_json& object, const char* key) {
  static const ordered_json kNull;
  return object.is_object() && object.contains(key) ? object[key] : kNull;
}

// The proof in a sentence, and the families that fit but differ (the near misses).
ordered_json proof_summary(const ordered_json& proof) {
  ordered_json out;
  out["ran"] = member(proof, "ran").is_boolean() ? member(proof, "ran") : ordered_json(false);
  const ordered_json& chosen = member(proof, "chosen");
  const std::size_t shapes = member(proof, "shapes").is_array() ? member(proof, "shapes").size() : 0;
  if (chosen.is_string())
    out["result"] = chosen.get<std::string>() + " proven: its CPU twin reproduces the reference on " + std::to_string(shapes) + " shape(s)";
  else
    out["result"] = out["ran"].get<bool>() ? "no family proven" : "not run";
  ordered_json near = ordered_json::array();
  for (const auto& f : member(proof, "families")) {
    if (!f.is_object() || f.value("proven", false) || !f.value("fits", false)) continue;
    near.push_back({{"family", f.value("family", "")}, {"why", f.value("why", "")}});
  }
  if (!near.empty()) out["near_misses"] = std::move(near);
  return out;
}

}  // namespace

nlohmann::ordered_json plan_result_json(const PlanResult& result, bool with_plan) {
  const ordered_json& plan = result.plan;
  ordered_json j;
  j["workspace"] = result.workspace;
  j["plan"] = "plans/v0_plan.md";
  j["task"] = member(member(plan, "task"), "name");
  const ordered_json& pattern = member(plan, "pattern");
  const bool proven = member(pattern, "proven").is_boolean() && member(pattern, "proven").get<bool>();
  j["family"] = proven ? member(pattern, "name") : ordered_json();
  j["pattern"] = {{"name", member(pattern, "name")}, {"confidence", member(pattern, "confidence")}, {"proven", proven}};
  j["confidence"] = member(pattern, "confidence");
  j["proof"] = proof_summary(member(plan, "proof"));
  const ordered_json& target = member(plan, "target");
  j["target"] = {{"product", member(target, "product")}, {"architecture", member(target, "architecture")},
                 {"framework", member(target, "framework")}, {"compile_target", member(target, "compile_target")}};
  ordered_json shapes = ordered_json::array();
  for (const auto& s : member(plan, "shapes")) {
    const ordered_json& r = member(s, "roofline");
    ordered_json row = {{"id", member(s, "id")}};
    if (r.is_object()) {
      row["bound"] = member(r, "bound");
      row["sol_us"] = micros(member(r, "sol_us"));
      row["attainable_us"] = micros(member(r, "attainable_us"));
    } else {
      row["bound"] = nullptr;  // no work count for this pattern and shape
    }
    shapes.push_back(std::move(row));
  }
  j["shapes"] = std::move(shapes);
  // Every id the plan cites, once, in the order it cites them: facts (record:field), the design's
  // records, the records consulted.
  ordered_json cited = ordered_json::array();
  std::set<std::string> seen;
  auto cite = [&](const ordered_json& id) {
    if (!id.is_string() || id == "not recorded" || id == "(no record found)") return;
    if (seen.insert(id.get<std::string>()).second) cited.push_back(id);
  };
  for (const auto& f : member(plan, "hardware_facts")) cite(member(f, "citation"));
  for (const auto& c : member(member(plan, "design"), "choices")) cite(member(c, "record"));
  for (const auto& c : member(plan, "records_consulted")) cite(member(c, "record"));
  j["cited"] = std::move(cited);
  j["notes"] = result.notes;
  if (with_plan) j["v0_plan"] = plan;
  return j;
}

}  // namespace kwiki
