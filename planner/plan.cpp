// make_plan: task + product -> roofline, cited V0 design, and a workspace written atomically.
#include <re2/re2.h>
#include <stdlib.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "design.hpp"
#include "family.hpp"
#include "file_util.hpp"
#include "generator/codegen.hpp"
#include "proof.hpp"
#include "trace.hpp"
#include "twin_build.hpp"
#include "kwiki/error.hpp"
#include "kwiki/planner.hpp"
#include "kwiki/query.hpp"
#include "row_reduction.hpp"
#include "subprocess.hpp"
#include "target.hpp"

namespace kwiki {
namespace {

namespace fs = std::filesystem;
using ordered_json = nlohmann::ordered_json;

std::string fmt(double v, int precision = 3) {
  char buf[64];
  if (v == 0) return "0";
  if (std::fabs(v) >= 1e6 || std::fabs(v) < 1e-3) std::snprintf(buf, sizeof buf, "%.*e", precision - 1, v);
  else std::snprintf(buf, sizeof buf, "%.*g", precision + 1, v);
  return buf;
}

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw Error(ErrorCode::kIo, "cannot write the workspace file", path.string());
}

std::string today() {
  const std::time_t t = std::time(nullptr);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

// Operator-ish words of a reference, for unknown patterns: the torch calls it makes.
std::vector<std::string> operator_words(const Task& task) {
  std::vector<std::string> words;
  if (task.reference.empty()) return words;
  std::ifstream in(task.reference);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string source = ss.str();
  static const RE2 kCall(R"((?:torch|F|nn\.functional)\.(\w+)\()");
  re2::StringPiece input(source);
  std::string name;
  std::set<std::string> seen;
  while (RE2::FindAndConsume(&input, kCall, &name))
    if (name != "tensor" && name != "empty" && name != "zeros" && seen.insert(name).second) words.push_back(name);
  return words;
}

ordered_json cited(const std::string& metric, const CitedValue& v) {
  ordered_json j;
  j["metric"] = metric;
  if (v.present) {
    j["value"] = v.value;
    j["unit"] = v.unit;
    j["citation"] = v.citation;
  } else {
    j["value"] = nullptr;
    j["citation"] = "not recorded";
  }
  return j;
}

std::string fact_line(const std::string& metric, const CitedValue& v) {
  if (!v.present) return "- " + metric + ": not recorded in the wiki (query the device or measure; no sibling's number is used)\n";
  return "- " + metric + ": " + fmt(v.value, 4) + (v.unit.empty() ? "" : " " + v.unit) + " <- " + v.citation + "\n";
}


// A task's name as a folder name: its letters, digits, '.', '_' and '-', the rest as '_'
// (a metadata.json id is other people's text: no '/', no "..", no quotes reach a path).
std::string folder_name(const std::string& name) {
  std::string out;
  for (const char c : name) out += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ? c : '_';
  if (out.empty() || out.find_first_not_of('.') == std::string::npos) out = "task";
  return out;
}

// Replacing an existing folder is allowed only for one kwiki made (its marker is a plain file).
void check_replaceable(const fs::path& dir, bool force) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(dir, ec)) || (fs::is_directory(dir, ec) && fs::is_empty(dir, ec))) return;
  if (!force) throw Error(ErrorCode::kBadInput, "the workspace exists and is not empty; pass --force to replace it", dir.string());
  if (!fs::is_directory(fs::symlink_status(dir, ec)) || !fs::is_regular_file(fs::symlink_status(dir / kWorkspaceMarker, ec)))
    throw Error(ErrorCode::kBadInput,
                std::string("--force replaces only a workspace made by kwiki plan (it has no ") + kWorkspaceMarker +
                    "); choose another --workspace, or move this folder away yourself",
                dir.string());
}

// The workspace is built beside its final place and renamed in: all or nothing.
void write_workspace(const PlanRequest& request, const Task& task, const std::string& product,
                     const std::vector<std::pair<std::string, std::string>>& files, PlanResult& result) {
  const fs::path final_dir =
      fs::absolute(request.workspace.empty() ? "kwiki-" + folder_name(task.name) + "-" + folder_name(product) : request.workspace);
  check_replaceable(final_dir, request.force);
  std::error_code ec;
  fs::create_directories(final_dir.parent_path(), ec);
  std::string staging_name = (final_dir.parent_path() / ("." + final_dir.filename().string() + ".kwiki-staging-XXXXXX")).string();
  if (!::mkdtemp(staging_name.data()))
    throw Error(ErrorCode::kIo, std::string("cannot create the staging folder: ") + std::strerror(errno), final_dir.parent_path().string());
  const fs::path staging = staging_name;
  try {
    fs::create_directories(staging / "task");
    // Links in a task folder are copied as links, never followed: a task cannot pull a file from
    // elsewhere on this machine into the workspace (and its git history).
    const auto copy = fs::copy_options::recursive | fs::copy_options::copy_symlinks;
    if (task.form == "benchmark") {
      fs::copy(task.path, staging / "task", copy);
    } else {
      fs::copy_file(task.path, staging / "task" / "task.json");
      if (!task.reference.empty()) fs::copy_file(task.reference, staging / "task" / fs::path(task.reference).filename());
    }
    if (!task.reference.empty()) fs::copy_file(task.reference, staging / "reference.py");
    for (const auto& [name, text] : files)
      if (!text.empty()) write_text(staging / name, text);  // an empty text: no such file (kernel_ir.json when nothing lowered)
    write_text(staging / kWorkspaceMarker, "made by kwiki plan; kwiki plan --force may replace this folder\n");
    write_text(staging / ".gitignore", "# kwiki's temporaries (a killed write) and its lock file are never committed\n.*.kwiki-tmp-*\n.kwiki-lock\n");
    write_text(staging / "memory" / ".keep", "");
    write_text(staging / "profiles" / ".keep", "");
    for (const std::vector<std::string>& args : {std::vector<std::string>{"init", "-q"}, {"add", "-A"}, {"commit", "-qm", "Step 0: plan"}}) {
      const detail::ProcessResult git = detail::run_git(staging.string(), args);
      if (!git.ok())
        throw Error(ErrorCode::kIo, "git " + args.front() + " could not set up the workspace repository: " +
                                        (git.started ? git.out.substr(0, 300) : git.error),
                    staging.string());
    }
    if (fs::exists(fs::symlink_status(final_dir, ec))) {
      check_replaceable(final_dir, request.force);  // again, just before it goes
      std::string old_name = (final_dir.parent_path() / ("." + final_dir.filename().string() + ".kwiki-old-XXXXXX")).string();
      if (!::mkdtemp(old_name.data())) throw Error(ErrorCode::kIo, "cannot set the old workspace aside", final_dir.string());
      fs::remove(old_name);
      fs::rename(final_dir, old_name);
      fs::rename(staging, final_dir);
      fs::remove_all(old_name, ec);
    } else {
      fs::rename(staging, final_dir);
    }
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(staging, ec);
    throw Error(ErrorCode::kIo, std::string("cannot write the workspace: ") + e.what(), final_dir.string());
  } catch (...) {
    fs::remove_all(staging, ec);
    throw;
  }
  result.workspace = final_dir.string();
}

}  // namespace

PlanResult make_plan(const PlanRequest& request, QueryEngine& engine) {
  Task task = load_task(request.task_path);
  if (!request.shape_ids.empty()) {
    std::vector<ShapeCase> kept;
    for (const auto& id : request.shape_ids) {
      auto it = std::find_if(task.shapes.begin(), task.shapes.end(), [&](const ShapeCase& s) { return s.id == id; });
      if (it == task.shapes.end()) throw Error(ErrorCode::kUsage, "--shapes names \"" + id + "\", which the task does not define", task.path);
      kept.push_back(*it);
    }
    task.shapes = std::move(kept);
  }
  // The target first: an unrecorded product stops everything (exit 3) before any work.
  const detail::TargetInfo target = [&] {
    detail::TargetInfo t = detail::resolve_target(engine, request.product, task.dtype);
    detail::choose_framework(t, request.framework);
    return t;
  }();
  PlanResult result;
  result.notes = target.notes;

  // Semantics: what the reference executes (the trace), and which family's twin reproduces it
  // (the proof). The source text only names a near miss; it never picks a kernel.
  const PatternGuess source_guess = detect_pattern(task);
  std::string only;
  if (!request.pattern_override.empty()) {
    const detail::FamilyRow* f = detail::find_family(request.pattern_override);
    if (!f) throw Error(ErrorCode::kUsage, "--pattern " + request.pattern_override + " names no kernel family (known: " + detail::family_names() + ")");
    only = f->name;
  }
  if (request.dry_run_timeout_seconds < 1 || request.dry_run_timeout_seconds > 3600)
    throw Error(ErrorCode::kUsage, "the dry-run timeout must be 1 to 3600 seconds");
  const detail::PrivateFolder scratch("kwiki-trace");
  detail::Trace dry;
  if (request.dry_run) {
    const detail::TwinLibrary twin = detail::build_twin_library();
    if (twin.path.empty()) result.notes.push_back("the CPU twins could not be built, so no family can be proven: " + twin.error);
    // The hand-written families are proven inside the trace (their twins run there); the generator after it.
    std::string families = only.empty() ? detail::family_names() : only;
    families = families == "generated" ? "" : families;
    if (const auto at = families.find(",generated"); at != std::string::npos) families.erase(at, 10);
    dry = detail::trace_task(task, {request.dry_run_timeout_seconds, scratch.path(), twin.path, families});
  } else {
    dry.skipped_because = "--no-dry-run";
  }
  std::optional<gen::Generation> generation;
  if (dry.ran && (only.empty() || only == "generated")) generation = gen::generate_from_trace(dry, task.shapes);
  detail::ProofResult proof = detail::decide_family(dry, only, source_guess.name, generation ? &*generation : nullptr);
  // A DSL framework (CuteDSL, FlyDSL) takes the generator's kernel, or a family's own V0 in that DSL;
  // unless --pattern names the family, a proven family without one gives way to the generator, else
  // the plan has no V0 (never a plan that kwiki baseline would refuse).
  std::string dsl_note;
  const auto* fw = detail::find_framework(target.framework);
  if (only.empty() && proof.chosen && fw && !fw->native && std::string_view(proof.chosen->name) != "generated" &&
      !detail::family_has_dsl_kernel(*proof.chosen, target.framework)) {
    const std::string family = proof.chosen->name;
    proof.chosen = nullptr;
    for (const auto& v : proof.verdicts)
      if (v.family == "generated" && v.proven) {
        proof.chosen = detail::find_family("generated");
        proof.binding = v.binding;
      }
    dsl_note = "the proven family " + family + " has no " + fw->language + " V0" +
               (proof.chosen ? ", so the generator's kernel is planned" : " and the generator does not lower this reference");
    if (!proof.chosen) proof.near_miss = dsl_note;
  }
  // A DSL that cannot cast to fp8 has no V0 for a generated kernel holding fp8 values.
  if (proof.chosen && fw && *fw->no_fp8 && std::string_view(proof.chosen->name) == "generated" && generation) {
    bool fp8 = false;
    for (const auto& b : generation->kernel.buffers) fp8 = fp8 || b.dtype == gen::DType::kE4M3FN || b.dtype == gen::DType::kE4M3FNUZ;
    for (const auto& n : generation->kernel.nodes) fp8 = fp8 || n.dtype == gen::DType::kE4M3FN || n.dtype == gen::DType::kE4M3FNUZ;
    if (fp8) {
      proof.chosen = nullptr;
      dsl_note = std::string("the generator's kernel has fp8 values, and ") + fw->no_fp8 + "; --framework " +
                 (std::string_view(fw->vendor) == "amd" ? "hip" : "cuda") + " writes it";
      proof.near_miss = dsl_note;
    }
  }
  PatternGuess pattern;
  pattern.name = proof.chosen ? proof.chosen->name : "unknown";
  if (proof.chosen) {
    pattern.confidence = 1.0;
    pattern.evidence.push_back("proven: its CPU twin matches the reference on " + std::to_string(proof.shapes.size()) + " shape(s) (plans/proof.json)");
  } else {
    pattern.confidence = 0.0;
    pattern.evidence.push_back("no family proven");
  }
  if (!source_guess.evidence.empty() && source_guess.name != "unknown")
    pattern.evidence.push_back("the source reads like " + source_guess.name + " (" + source_guess.evidence.front() + "); not used to choose");
  result.pattern = pattern.name;
  if (!dsl_note.empty()) result.notes.push_back(dsl_note);
  if (dry.ran) {
    result.notes.push_back("semantics recorded by " + dry.python + " (torch " + dry.torch_version + ") on the CPU: plans/graph.json");
  } else {
    result.notes.push_back("the reference was not run (" + dry.skipped_because + "); shapes and dtypes are taken from the task's files");
    for (const auto& t : dry.interpreters_tried) result.notes.push_back("interpreter tried: " + t);
  }
  if (proof.chosen) {
    result.notes.push_back("family " + pattern.name + " proven: its CPU twin reproduces the reference on every shape");
  } else {
    const std::string why = proof.ran ? (proof.near_miss.empty() ? "no family's interface fits the reference" : "the nearest, " + proof.near_miss)
                                      : "semantics unproven: " + proof.not_run_because;
    result.notes.push_back("kwiki has no V0 for this task: " + why +
                           ". The harness still checks and measures a kernel of yours: kwiki baseline --kernel FILE (see kernel_abi.h after a first "
                           "kwiki baseline)");
  }
  // Tensors the dry run saw may fill sizes the kwargs did not name.
  if (dry.ran && !task.metadata.empty()) {
    for (const auto& shape : task.shapes) {
      if (auto od = task.metadata.find("output_dtypes"); od != task.metadata.end() && od->is_object())
        for (const auto& out : shape.outputs)
          if (od->contains(out.name) && (*od)[out.name] != out.dtype)
            result.notes.push_back("metadata.json says output " + out.name + " is " + (*od)[out.name].get<std::string>() + "; the dry run of " +
                                   shape.id + " produced " + out.dtype);
    }
  }

  // Rooflines.
  ordered_json shapes_json = ordered_json::array();
  std::string roofline_table =
      "| shape | matrix FLOPs | vector FLOPs | bytes read | bytes written | FLOP/byte | ridge | bound | SOL us | launch floor us | attainable us | stop at (90%) us |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  for (const auto& shape : task.shapes) {
    ordered_json s;
    s["id"] = shape.id;
    s["dims"] = shape.dims;
    std::optional<WorkCounts> work = pattern.name == "unknown" ? std::nullopt : count_work(pattern.name, shape, task.dtype);
    // The task's own roofline.json: used when kwiki cannot count, compared when it can.
    std::optional<WorkCounts> given;
    if (auto r = task.roofline.find("shapes"); r != task.roofline.end() && r->contains(shape.id)) {
      const auto& g = (*r)[shape.id];
      WorkCounts w;
      if (auto f = g.find("semantic_W_flops"); f != g.end() && f->is_object())
        for (const auto& [dt, n] : f->items()) (dt == "fp32" ? w.vector_flops : w.matrix_flops) += n.get<double>();
      w.bytes_read = g.value("semantic_Q_read_bytes", 0.0);
      w.bytes_written = g.value("semantic_Q_write_bytes", 0.0);
      w.basis = "the task's roofline.json";
      given = w;
    }
    // No family (or one whose counter lacks a size): count the recorded ops at the given sizes.
    if (const detail::ShapeTrace* traced = dry.shape(shape.id); !work && traced && traced->real_ok) {
      WorkCounts w;
      w.matrix_flops = traced->real_matrix_flops;
      w.vector_flops = traced->real_vector_flops;
      for (const auto& t : shape.inputs) {
        const double b = t.numel_bytes();
        w.bytes_read += b;
        if (t.updated) w.bytes_written += b;
      }
      for (const auto& t : shape.outputs)
        if (t.alias_of.empty()) w.bytes_written += t.numel_bytes();
      w.basis = "counted op by op from the reference's trace at the given sizes (matrix products 2MNK, reductions per input element, other "
                "arithmetic per output element); bytes of every input, parameter and output";
      work = w;
    }
    if (!work && given) work = given;
    if (work) {
      const Roofline r = evaluate_roofline(*work, target.ceilings);
      s["work"] = {{"matrix_flops", work->matrix_flops}, {"vector_flops", work->vector_flops}, {"bytes_read", work->bytes_read},
                   {"bytes_written", work->bytes_written}, {"basis", work->basis}};
      // An unknown launch floor is stated as unknown: no stop condition rests on a floor of 0.
      const bool floor_known = target.ceilings.launch_floor_us.present;
      s["roofline"] = {{"intensity_flop_per_byte", r.intensity}, {"ridge_flop_per_byte", r.ridge}, {"compute_us", r.compute_us},
                       {"memory_us", r.memory_us}, {"sol_us", r.sol_us},
                       {"launch_floor_us", floor_known ? ordered_json(r.floor_us) : ordered_json()},
                       {"attainable_us", r.attainable_us}, {"bound", r.bound},
                       {"stop_at_us", floor_known ? ordered_json(r.attainable_us / 0.9) : ordered_json()}};
      if (!floor_known) s["roofline"]["note"] = "launch floor not recorded for " + target.product + ": attainable is SOL alone and no stop-at is set";
      if (target.ceilings.measured_bandwidth_tb_s.present) {
        Ceilings measured = target.ceilings;
        measured.bandwidth_tb_s = target.ceilings.measured_bandwidth_tb_s;
        if (target.ceilings.measured_matrix_tflops.present) measured.matrix_peak_tflops = target.ceilings.measured_matrix_tflops;
        s["roofline"]["sol_us_measured_ceilings"] = evaluate_roofline(*work, measured).sol_us;
      }
      if (given && work->basis != given->basis) {
        const double ours = work->bytes_read + work->bytes_written, theirs = given->bytes_read + given->bytes_written;
        s["given_roofline"] = {{"flops", given->matrix_flops + given->vector_flops}, {"bytes", theirs},
                               {"bytes_difference_pct", theirs > 0 ? 100.0 * (ours - theirs) / theirs : 0.0}};
      }
      roofline_table += "| " + shape.id + " | " + fmt(work->matrix_flops) + " | " + fmt(work->vector_flops) + " | " + fmt(work->bytes_read) +
                        " | " + fmt(work->bytes_written) + " | " + fmt(r.intensity) + " | " + fmt(r.ridge) + " | " + r.bound + " | " +
                        fmt(r.sol_us) + " | " + (floor_known ? fmt(r.floor_us) : "unknown") + " | " + fmt(r.attainable_us) + " | " +
                        (floor_known ? fmt(r.attainable_us / 0.9) : "not set (floor unknown)") + " |\n";
    } else {
      s["roofline"] = nullptr;
      s["why_no_roofline"] = "the reference was not traced at this shape's sizes and the task gives no roofline.json counts for it";
      roofline_table += "| " + shape.id + " | - | - | - | - | - | - | - | not computed | - | - | - |\n";
    }
    if (!shape.inputs.empty()) {
      ordered_json tensors = ordered_json::array();
      for (const auto& t : shape.inputs) tensors.push_back({{"name", t.name}, {"shape", t.shape}, {"dtype", t.dtype}, {"updated_in_place", t.updated}});
      s["inputs"] = tensors;
      ordered_json outs = ordered_json::array();
      for (const auto& t : shape.outputs) {
        ordered_json o = {{"name", t.name}, {"shape", t.shape}, {"dtype", t.dtype}};
        if (!t.alias_of.empty()) o["alias_of"] = t.alias_of;
        outs.push_back(std::move(o));
      }
      s["outputs"] = outs;
    }
    shapes_json.push_back(std::move(s));
  }

  const auto words = operator_words(task);
  const detail::Design design = detail::design_v0(engine, pattern.name, task, target, words);

  // plans/v0_plan.json
  ordered_json plan;
  plan["schema"] = "kwiki-plan-1";
  plan["created"] = today();
  plan["task"] = {{"name", task.name}, {"form", task.form}, {"path", task.path}, {"dtype", task.dtype}, {"params", task.params}};
  plan["pattern"] = {{"name", pattern.name}, {"confidence", pattern.confidence}, {"evidence", pattern.evidence}, {"proven", proof.chosen != nullptr}};
  plan["target"] = {{"product", target.product}, {"vendor", target.vendor}, {"architecture", target.arch}, {"framework", target.framework},
                    {"compile_target", target.compile_target}, {"spec_record", target.spec_record}, {"warp_size", target.warp_size}};
  ordered_json facts = ordered_json::array();
  facts.push_back(cited("bandwidth", target.ceilings.bandwidth_tb_s));
  facts.push_back(cited("matrix peak (" + task.dtype + ", dense)", target.ceilings.matrix_peak_tflops));
  facts.push_back(cited("vector peak (fp32)", target.ceilings.vector_peak_tflops));
  facts.push_back(cited(target.compute_unit_name + " count", target.compute_units));
  facts.push_back(cited("L2", target.l2_mb));
  if (target.llc_mb.present) facts.push_back(cited("last-level cache (Infinity Cache)", target.llc_mb));
  facts.push_back(cited(target.onchip_name + " per " + target.compute_unit_name, target.onchip_kb));
  if (target.ceilings.measured_bandwidth_tb_s.present) facts.push_back(cited("measured copy bandwidth", target.ceilings.measured_bandwidth_tb_s));
  if (target.ceilings.measured_matrix_tflops.present) facts.push_back(cited("measured matrix rate", target.ceilings.measured_matrix_tflops));
  if (target.ceilings.launch_floor_us.present) facts.push_back(cited("launch floor (empty kernel)", target.ceilings.launch_floor_us));
  plan["hardware_facts"] = facts;
  plan["shapes"] = shapes_json;
  ordered_json choices = ordered_json::array();
  for (const auto& c : design.choices) choices.push_back({{"aspect", c.aspect}, {"choice", c.choice}, {"record", c.record}});
  plan["design"] = {{"template", design.template_name.empty() ? ordered_json() : ordered_json(design.template_name)},
                    {"accumulation", "fp32"},
                    {"choices", choices}};
  plan["correctness"] = {{"rules", design.correctness}, {"boundary_cases", design.boundary_cases}};
  plan["measurement"] = design.measurement;
  plan["isa_targets"] = design.isa_targets;
  plan["risks"] = design.risks;
  ordered_json consulted = ordered_json::array();
  for (const auto& c : design.consulted) consulted.push_back({{"record", c.record}, {"query_id", c.query_id}, {"aspect", c.aspect}});
  plan["records_consulted"] = consulted;
  plan["dry_run"] = {{"ran", dry.ran}, {"python", dry.python}, {"torch", dry.torch_version}, {"skipped_because", dry.skipped_because}};
  plan["proof"] = proof.to_json();
  if (generation) {
    ordered_json g = {{"lowered", generation->lowered}, {"proven", generation->proven}};
    if (!generation->lowered) g["declined"] = {{"op", generation->op}, {"why", generation->why}};
    else g["skeleton"] = gen::skeleton_name(gen::schedule(generation->kernel));
    if (generation->proof_ran) g["shapes"] = generation->shapes;
    if (generation->lowered && !generation->proven) g["why"] = generation->why;
    plan["generator"] = g;
  }
  if (proof.chosen) plan["family"] = {{"name", proof.chosen->name}, {"binding", proof.binding}, {"abi", proof.chosen->abi}};
  plan["notes"] = result.notes;
  result.plan = plan;

  // README.md (Step 0) and plans/v0_plan.md.
  std::string hw;
  hw += fact_line("HBM bandwidth", target.ceilings.bandwidth_tb_s);
  hw += fact_line(task.dtype + " dense matrix peak", target.ceilings.matrix_peak_tflops);
  hw += fact_line("fp32 vector peak (non-matrix work)", target.ceilings.vector_peak_tflops);
  hw += fact_line(target.compute_unit_name + " count", target.compute_units);
  hw += fact_line("L2 cache", target.l2_mb);
  if (target.llc_mb.present) hw += fact_line("Infinity Cache (last level; the timing flush covers twice it)", target.llc_mb);
  hw += fact_line(target.onchip_name + " per " + target.compute_unit_name, target.onchip_kb);
  if (target.ceilings.measured_bandwidth_tb_s.present) hw += fact_line("measured device-copy bandwidth", target.ceilings.measured_bandwidth_tb_s);
  if (target.ceilings.measured_matrix_tflops.present) hw += fact_line("measured matrix rate", target.ceilings.measured_matrix_tflops);
  if (target.ceilings.launch_floor_us.present) hw += fact_line("launch floor (one empty kernel)", target.ceilings.launch_floor_us);

  std::string readme = "# " + task.name + " on " + target.product + ": Step 0\n\n";
  readme += "Task: `" + task.path + "` (" + task.form + ", " + task.dtype + "); pattern **" + pattern.name + "** (confidence " +
            fmt(pattern.confidence, 2) + ": ";
  for (std::size_t i = 0; i < pattern.evidence.size(); ++i) readme += (i ? "; " : "") + pattern.evidence[i];
  readme += ").\n\nTarget: " + target.product + " -> " + target.arch + " -> " + detail::find_framework(target.framework)->language + ", compile target `" +
            target.compile_target + "` (" + target.spec_record + ").\n\n## Hardware facts\n\n" + hw;
  readme += "\n## Roofline per shape\n\nSOL = max(matrix FLOPs / matrix peak + vector FLOPs / vector peak, bytes / bandwidth); attainable = max(SOL, launch floor). "
            "Special functions count as one vector FLOP each.\n\n" + roofline_table;
  readme += "\n## Stop conditions\n\nA shape is done when it runs at 90% of the peak that bounds it: time <= attainable / 0.9 (last column above).\n\n";
  readme += "## ISA targets for later versions\n\n";
  for (const auto& isa : design.isa_targets) readme += "- " + isa + "\n";
  readme += "\nV0's static evidence against these targets is added by `kwiki baseline` (compiler resource report and SASS / ISA listing).\n";
  if (!result.notes.empty()) {
    readme += "\n## Notes\n\n";
    for (const auto& n : result.notes) readme += "- " + n + "\n";
  }

  std::string md = "# V0 plan: " + task.name + " on " + target.product + "\n\n## Semantics\n\n";
  md += "- pattern: " + pattern.name + " (confidence " + fmt(pattern.confidence, 2) + ")\n- dtype: " + task.dtype + ", accumulation fp32\n";
  if (!task.reference.empty()) md += "- reference: `" + task.reference + "`\n";
  for (const auto& shape : task.shapes) {
    md += "- shape `" + shape.id + "`:";
    for (const auto& [k, v] : shape.dims) md += " " + k + "=" + fmt(v, 6);
    if (!shape.description.empty()) md += " (" + shape.description + ")";
    md += "\n";
    for (const auto& t : shape.inputs) {
      md += "  - input " + t.name + " " + t.dtype + " [";
      for (std::size_t i = 0; i < t.shape.size(); ++i) md += (i ? ", " : "") + std::to_string(t.shape[i]);
      md += std::string("]") + (t.updated ? " (updated in place)" : "") + "\n";
    }
    for (const auto& t : shape.outputs) {
      md += "  - output " + t.name + " " + t.dtype + " [";
      for (std::size_t i = 0; i < t.shape.size(); ++i) md += (i ? ", " : "") + std::to_string(t.shape[i]);
      md += "]\n";
    }
  }
  md += "\n## Target\n\n" + target.product + " (" + target.arch + "), " + target.framework + ", `" + target.compile_target + "`, warp/wavefront " +
        std::to_string(target.warp_size) + "\n\n## Hardware facts\n\n" + hw + "\n## Roofline\n\n" + roofline_table;
  md += "\n## V0 design" + (design.template_name.empty() ? std::string(" (no template: pattern unknown)") : " (template `" + design.template_name + "`)") + "\n\n";
  for (const auto& c : design.choices) md += "- **" + c.aspect + "**: " + c.choice + " <- " + c.record + "\n";
  md += "\n## Correctness plan\n\n";
  for (const auto& c : design.correctness) md += "- " + c + "\n";
  md += "- boundary cases:";
  for (const auto& b : design.boundary_cases) md += " " + b + ";";
  md += "\n\n## Measurement plan\n\n";
  for (const auto& m : design.measurement) md += "- " + m + "\n";
  md += "\n## Risks\n\n";
  for (const auto& r : design.risks) md += "- " + r + "\n";
  md += "\n## Records consulted\n\n| record | query_id | for |\n| --- | --- | --- |\n";
  for (const auto& c : design.consulted) md += "| " + c.record + " | " + c.query_id + " | " + c.aspect + " |\n";

  write_workspace(request, task, target.product, {{"README.md", readme},
                   {"plans/v0_plan.md", md},
                   {"plans/v0_plan.json", plan.dump(2) + "\n"},
                   {"plans/graph.json", dry.graph_json().dump(1) + "\n"},
                   {"plans/proof.json", plan["proof"].dump(2) + "\n"},
                   {"plans/kernel_ir.json", generation && generation->lowered ? generation->kernel.to_json().dump(1) + "\n" : std::string()}},
                  result);
  return result;
}

}  // namespace kwiki
