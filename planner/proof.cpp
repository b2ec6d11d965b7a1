// The proof: which family's CPU twin reproduces the reference on every traced shape.
#include "proof.hpp"

#include <cstdio>
#include <map>
#include <sstream>

namespace kwiki::detail {
namespace {

using json = nlohmann::json;

// The outputs that differ in one shape's result, as "out: max abs err 0.5 (beyond tolerance)".
std::string differing(const json& result) {
  std::string out;
  const json errors = result.value("errors", json::object());
  for (const auto& [name, e] : errors.items()) {
    if (e.value("ok", true)) continue;
    const std::string message = e.value("message", "");
    out += (out.empty() ? "" : "; ") + (message.empty() ? name + " differs" : message);
  }
  if (out.empty()) out = result.value("why", "the twin failed");
  return out;
}

}  // namespace

nlohmann::ordered_json ProofResult::to_json() const {
  nlohmann::ordered_json j;
  j["ran"] = ran;
  if (!ran) j["not_run_because"] = not_run_because;
  j["chosen"] = chosen ? nlohmann::ordered_json(chosen->name) : nlohmann::ordered_json();
  j["shapes"] = shapes;
  if (chosen) j["binding"] = binding;
  if (!near_miss.empty()) j["near_miss"] = near_miss;
  nlohmann::ordered_json v = nlohmann::ordered_json::array();
  for (const auto& f : verdicts)
    v.push_back({{"family", f.family}, {"fits", f.fits}, {"proven", f.proven}, {"worst_abs_err", f.worst_abs}, {"why", f.why}});
  j["families"] = v;
  return j;
}

// The generator row's verdict: lowered means it fits; proven by the IR's own CPU twin.
FamilyVerdict generated_verdict(const gen::Generation* g) {
  FamilyVerdict v;
  v.family = "generated";
  if (!g) {
    v.why = "the generator did not run";
    return v;
  }
  v.fits = g->lowered;
  v.proven = g->lowered && g->proof_ran && g->proven;
  v.worst_abs = g->worst_abs;
  if (!g->lowered) v.why = "does not lower: " + (g->op.empty() ? std::string() : g->op + ": ") + g->why;
  else if (!v.proven) v.why = "its twin differs from the reference: " + g->why;
  if (g->lowered) {
    json outputs = json::object();
    for (const auto& r : g->kernel.results) outputs[r.name] = r.name;
    v.binding = {{"roles", json::object()}, {"params", json::object()}, {"outputs", outputs}, {"recipe", json::parse(g->launch_recipe().dump())}};
  }
  return v;
}

ProofResult decide_family(const Trace& trace, const std::string& only, const std::string& guess, const gen::Generation* generated) {
  ProofResult r;
  if (!trace.ran) {
    r.not_run_because = trace.skipped_because.empty() ? "the reference was not run" : trace.skipped_because;
    return r;
  }
  std::vector<std::string> failed;
  for (const auto& s : trace.shapes) {
    if (!s.ok) failed.push_back("shape \"" + s.id + "\": " + s.error);
    else if (only != "generated" && (!s.proof.is_array() || s.proof.empty())) failed.push_back("shape \"" + s.id + "\": no twin was run (no twin library)");
    else r.shapes.push_back(s.id);
  }
  if (!failed.empty() || r.shapes.empty()) {
    r.not_run_because = failed.empty() ? "no shape to check" : failed.front() + (failed.size() > 1 ? " (and " + std::to_string(failed.size() - 1) + " more)" : "");
    for (const auto& l : trace.limitations) r.not_run_because += "; " + l;
    return r;
  }
  r.ran = true;
  for (std::size_t i = 0; i < kFamilyCount; ++i) {
    const FamilyRow& row = kFamilies[i];
    if (!only.empty() && only != row.name) continue;
    if (std::string_view(row.name) == "generated") {
      FamilyVerdict v = generated_verdict(generated);
      if (v.proven && !r.chosen) {
        r.chosen = &row;
        r.binding = v.binding;
      }
      r.verdicts.push_back(std::move(v));
      continue;
    }
    FamilyVerdict v;
    v.family = row.name;
    v.fits = v.proven = true;
    json roles;
    for (const auto& s : trace.shapes) {
      const json* result = nullptr;
      for (const auto& p : s.proof)
        if (p.value("family", "") == row.name) result = &p;
      if (!result) {
        v.fits = v.proven = false;
        v.why = "not tried on shape \"" + s.id + "\"";
        break;
      }
      if (!result->value("fits", false)) {
        v.fits = v.proven = false;
        v.why = "does not fit: the reference " + result->value("why", "") + " (shape \"" + s.id + "\")";
        break;
      }
      if (v.binding.is_null()) v.binding = result->value("binding", json());
      v.worst_abs = std::max(v.worst_abs, result->value("worst", 0.0));
      if (!result->value("ok", false)) {
        v.proven = false;
        if (v.why.empty()) v.why = "its twin differs from the reference on shape \"" + s.id + "\": " + differing(*result);
        continue;
      }
      // The roles and constants every shape binds must agree (an optional role, gemm's bias, may
      // come and go; a constant read per call from its source, or derived per call, may differ).
      const json binding = result->value("binding", json());
      json these = binding.value("roles", json::object());
      json constants = binding.value("params", json::object());
      for (const auto& key : binding.value("symbolic", json::array())) constants.erase(key.get<std::string>());
      std::vector<std::string> drop;
      for (const auto& [key, value] : constants.items()) {
        if (key.size() <= 5 || !key.ends_with("_from")) continue;
        drop.push_back(key);
        if (!value.is_null()) drop.push_back(key.substr(0, key.size() - 5));
      }
      for (const auto& key : drop) constants.erase(key);
      these["(constants)"] = constants;
      std::istringstream optional(row.optional_roles);
      for (std::string role; optional >> role;) {
        if (these.contains(role) && !v.binding["roles"].contains(role)) v.binding["roles"][role] = these[role];
        these.erase(role);
      }
      if (roles.is_null()) roles = these;
      else if (roles != these) {
        v.proven = false;
        v.why = "binds the reference's tensors or constants differently on shape \"" + s.id + "\" (" + these.dump() + " against " + roles.dump() + ")";
      }
    }
    if (v.proven && !r.chosen) {
      r.chosen = &row;
      r.binding = v.binding;
    }
    r.verdicts.push_back(std::move(v));
  }
  if (!r.chosen) {
    // The closest miss: the family a pattern matcher names, else the fitting family nearest to it.
    const FamilyVerdict* near = nullptr;
    for (const auto& v : r.verdicts)
      if (v.family == guess || (!only.empty() && v.family == only)) near = &v;
    if (!near)
      for (const auto& v : r.verdicts)
        if (v.fits && (!near || v.worst_abs < near->worst_abs)) near = &v;
    if (near) r.near_miss = near->family + ": " + near->why;
  }
  return r;
}

}  // namespace kwiki::detail
