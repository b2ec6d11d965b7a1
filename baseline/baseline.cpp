// kwiki baseline: read the workspace, generate the candidate and its harness, build, run, report, commit.
#include "kwiki/baseline.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "embedded_files.hpp"
#include "family.hpp"
#include "generator/codegen.hpp"
#include "generator/kernel_ir.hpp"
#include "file_util.hpp"
#include "kwiki/error.hpp"
#include "kwiki/memory.hpp"
#include "stages.hpp"
#include "target.hpp"
#include "trace.hpp"

namespace kwiki {
namespace detail {

std::string embedded_file(const std::string& name) {
  for (const EmbeddedFile* f = kBaselineFiles; f->name; ++f)
    if (name == f->name) return f->text;
  return {};
}

ProcessResult run_tool(const Args& argv, double timeout_seconds, const std::string& stdin_text) {
  ProcessSpec spec;
  spec.argv = argv;
  spec.timeout_seconds = timeout_seconds;
  spec.stdin_text = stdin_text;
  return run_process(spec);
}

Args concat(Args a, const Args& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  write_file_atomically(p.string(), text);
}

fs::path cache_folder() {
  if (const char* c = std::getenv("XDG_CACHE_HOME"); c && *c) return fs::path(c) / "kwiki";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "kwiki";
  return fs::temp_directory_path() / "kwiki-cache";
}

}  // namespace detail
namespace {

using namespace detail;

std::string element_type(const std::string& dtype, const std::string& vendor) {
  if (dtype == "fp32") return "float";
  if (dtype == "fp16") return vendor == "amd" ? "__half" : "half";
  return vendor == "amd" ? "kwiki_bf16" : "__nv_bfloat16";  // kwiki_bf16: HIP's bf16, or its bits before ROCm 5.7
}

struct Device {
  bool present = false;
  std::string name, uuid, driver;
};

Device detect_nvidia_device() {
  Device d;
  const ProcessResult r = run_tool({"nvidia-smi", "--query-gpu=name,uuid,driver_version", "--format=csv,noheader"}, 60);
  if (!r.ok() || r.out.empty()) return d;
  std::stringstream ss(r.out.substr(0, r.out.find('\n')));
  std::getline(ss, d.name, ',');
  std::getline(ss, d.uuid, ',');
  std::getline(ss, d.driver, ',');
  auto trim = [](std::string& s) {
    s.erase(0, s.find_first_not_of(' '));
    s.erase(s.find_last_not_of(" \r\n") + 1);
  };
  trim(d.name);
  trim(d.uuid);
  trim(d.driver);
  d.present = !d.name.empty();
  return d;
}

// "h200-sxm" -> "H200": the family word a device name carries.
bool device_matches(const std::string& device_name, const std::string& product) {
  std::string family = product.substr(0, product.find('-'));
  for (auto& c : family) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string name = device_name;
  for (auto& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const auto pos = name.find(family);
  if (pos == std::string::npos) return false;
  const std::size_t end = pos + family.size();
  return end == name.size() || !std::isalnum(static_cast<unsigned char>(name[end]));  // H20 is not H200
}

// A plan is read back from a folder anyone may have written: every field kwiki puts into a
// file name, a generated source or a compiler's arguments is checked against what kwiki writes.
std::string plan_field(const ordered_json& plan, const char* pointer, const fs::path& plan_path) {
  const ordered_json::json_pointer at(pointer);
  if (!plan.contains(at) || !plan[at].is_string())
    throw Error(ErrorCode::kBadInput, std::string("the plan has no string at ") + pointer + "; run `kwiki plan` again", plan_path.string(), pointer);
  return plan[at].get<std::string>();
}

bool only_chars(const std::string& s, const char* extra) {
  return !s.empty() && s.size() <= 64 &&
         std::all_of(s.begin(), s.end(), [&](char c) { return std::isalnum(static_cast<unsigned char>(c)) || std::strchr(extra, c); });
}

PlanHeader read_plan_header(const ordered_json& plan, const fs::path& plan_path) {
  PlanHeader h{plan_field(plan, "/pattern/name", plan_path), plan_field(plan, "/target/vendor", plan_path),
               plan_field(plan, "/target/product", plan_path), plan_field(plan, "/target/compile_target", plan_path),
               plan_field(plan, "/task/dtype", plan_path), plan_field(plan, "/target/framework", plan_path)};
  const auto refuse = [&](const char* pointer, const std::string& why) { throw Error(ErrorCode::kBadInput, why, plan_path.string(), pointer); };
  if (!only_chars(h.pattern, "_")) refuse("/pattern/name", "the plan's pattern \"" + h.pattern + "\" is not a pattern name");
  if (h.vendor != "nvidia" && h.vendor != "amd") refuse("/target/vendor", "the plan's vendor must be nvidia or amd");
  if (!only_chars(h.product, "-_. ")) refuse("/target/product", "the plan's product \"" + h.product + "\" is not a product name");
  const detail::ArchTarget* arch = detail::find_compile_target(h.target);
  if (!arch || h.vendor != arch->vendor) {
    std::string known;
    for (const auto& row : detail::kArchTargets) known += std::string(known.empty() ? "" : ", ") + row.compile_target;
    refuse("/target/compile_target", "the plan's compile_target \"" + h.target + "\" is not one kwiki compiles for " + h.vendor + " (" + known + ")");
  }
  if (!only_chars(h.dtype, "_")) refuse("/task/dtype", "the plan's dtype \"" + h.dtype + "\" is not a dtype name");
  // Plans written before --framework record cuda/hip here too; any other word is refused.
  const detail::FrameworkRow* fw = detail::find_framework(h.framework);
  if (!fw || h.vendor != fw->vendor) refuse("/target/framework", "the plan's framework \"" + h.framework + "\" is not one kwiki writes for " + h.vendor);
  return h;
}

// ---- generate: the candidate, kernel.py, the harness, kernel_abi.h; never over a file the user changed ----

constexpr const char* kManifest = ".kwiki-generated.json";

// Writes a file kwiki generates, unless the user changed the version kwiki wrote last: then the
// user's stays and kwiki's goes beside it as NAME.kwiki-new (with a note).
void write_generated(Context& c, const std::string& name, const std::string& text) {
  const fs::path path = c.ws / name, manifest_path = c.ws / kManifest;
  ordered_json manifest = ordered_json::parse(read_text(manifest_path), nullptr, false);
  if (!manifest.is_object()) manifest = ordered_json::object();
  std::error_code ec;
  if (fs::exists(path, ec)) {
    const std::string now = read_text(path);
    const bool ours = manifest.contains(name) && manifest[name] == hash64_hex(now);
    if (now != text && !ours) {
      write_text(c.ws / (name + ".kwiki-new"), text);
      c.result.notes.push_back(name + " differs from what kwiki wrote (you changed it): kept; kwiki's version is " + name + ".kwiki-new");
      return;
    }
  }
  write_text(path, text);
  manifest[name] = hash64_hex(text);
  write_text(manifest_path, manifest.dump(2) + "\n");
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = 0; (at = text.find(from, at)) != std::string::npos; at += to.size()) text.replace(at, from.size(), to);
  return text;
}

// The first shape of plans/graph.json that ran: the reference's tensors by name and kind.
const ordered_json* first_traced_shape(const Context& c) {
  if (!c.graph.is_object() || !c.graph.contains("shapes") || !c.graph["shapes"].is_object()) return nullptr;
  for (const auto& [id, s] : c.graph["shapes"].items())
    if (s.is_object() && s.contains("inputs")) return &s;
  return nullptr;
}

// kwiki's generic ABI for a kernel of the user's with no family: tensor inputs, parameters and
// outputs in order; every tensor's sizes as dims; the scalar inputs as params.
ordered_json generic_binding(const Context& c) {
  const ordered_json* s = first_traced_shape(c);
  if (!s) throw Error(ErrorCode::kBadInput, "the plan has no trace of the reference (plans/graph.json), so kwiki cannot derive a launcher signature; "
                                            "run kwiki plan where torch is importable", c.plan_path.string());
  ordered_json b = {{"family", "generic"}, {"inputs", ordered_json::array()}, {"params", ordered_json::array()},
                    {"scalars", ordered_json::array()}, {"outputs", ordered_json::array()}};
  for (const auto& t : (*s)["inputs"]) {
    if (t.contains("shape")) b["inputs"].push_back(t["name"]);
    else if (t.value("value", ordered_json()).is_number()) b["scalars"].push_back(t["name"]);
  }
  for (const auto& t : (*s)["params"]) b["params"].push_back(t["name"]);
  for (const auto& t : (*s)["outputs"]) b["outputs"].push_back(t["name"]);
  return b;
}

// kernel_abi.h: the launcher a kernel for this workspace implements, tensor by tensor.
std::string abi_header(const Context& c) {
  std::string h = "// kernel_abi.h: the launcher your kernel implements for this workspace (written by kwiki baseline).\n"
                  "// Export both from your .cu / .hip file; kernel.py loads them with ctypes (launcher ABI v1).\n"
                  "#pragma once\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n"
                  "int kwiki_abi_version(void); /* return 1 */\n"
                  "int kwiki_launch(void* const* tensors, int num_tensors, const long long* dims, int num_dims,\n"
                  "                 const double* params, int num_params, void* stream); /* enqueue on stream, return 0 */\n"
                  "#ifdef __cplusplus\n}\n#endif\n\n";
  const ordered_json* s = first_traced_shape(c);
  if (c.binding.value("family", "") != "generic") {
    const FamilyRow* row = find_family(c.binding.value("family", ""));
    h += "// Family " + c.binding.value("family", std::string("?")) + ": " + (row ? row->abi : "") + "\n// Roles -> the reference's tensors:\n";
    const ordered_json roles = c.binding.value("roles", ordered_json::object()), params = c.binding.value("params", ordered_json::object());
    for (const auto& [role, src] : roles.items())
      h += "//   " + role + " = " + src[0].get<std::string>() + " " + src[1].get<std::string>() + "\n";
    for (const auto& [name, value] : params.items()) h += "//   param " + name + " = " + value.dump() + "\n";
    return h;
  }
  std::size_t index = 0, dim = 0;
  h += "// No kwiki family computes this task: kwiki's generic order. Element types are the reference's.\n";
  auto list = [&](const char* kind, const ordered_json& tensors, bool tensors_only) {
    for (const auto& t : tensors) {
      if (tensors_only && !t.contains("shape")) continue;
      std::string dims;
      for (std::size_t i = 0; i < t["shape"].size(); ++i) dims += (i ? ", " : "") + std::string("dims[") + std::to_string(dim++) + "]";
      h += "//   tensors[" + std::to_string(index++) + "] = " + t.value("name", std::string("?")) + " (" + kind + ", " + t.value("dtype", std::string("?")) +
           ") [" + dims + "]\n";
    }
  };
  if (s) {
    list("input", (*s)["inputs"], true);
    list("parameter", (*s)["params"], true);
    list("output: write it", (*s)["outputs"], true);
    std::size_t p = 0;
    for (const auto& t : (*s)["inputs"])
      if (!t.contains("shape") && t.value("value", ordered_json()).is_number()) h += "//   params[" + std::to_string(p++) + "] = " + t["name"].get<std::string>() + "\n";
  }
  return h;
}

// Which candidate, its source, and the harness files.
void generate(Context& c) {
  const std::string& kernel = c.request.kernel_file;
  const std::string ext = fs::path(kernel).extension().string();
  if (!kernel.empty()) {
    if (!fs::is_regular_file(kernel)) throw Error(ErrorCode::kBadInput, "--kernel file not found", kernel);
    if (ext == ".py") {
      c.candidate = Candidate::kUserPython;
    } else if (ext == ".cu" || ext == ".hip" || ext == ".cuh" || ext == ".cpp") {
      c.candidate = Candidate::kUserGpu;
      if (c.cpu) throw Error(ErrorCode::kUsage, "--device cpu runs a family's CPU twin or a Python Model; a CUDA/HIP kernel needs a GPU", kernel);
    } else {
      throw Error(ErrorCode::kUsage, "--kernel takes a CUDA/HIP source (.cu, .hip) or a Python Model (.py)", kernel);
    }
  } else if (c.family.empty()) {
    c.binding = generic_binding(c);
    write_generated(c, "kernel_abi.h", abi_header(c));
    write_generated(c, "test_kernel.py", embedded_file("test_kernel.py"));
    write_generated(c, "kwiki_device.py", planner_file("kwiki_device.py"));
    write_generated(c, "kwiki_families.py", planner_file("kwiki_families.py"));
    std::string why = "no family was proven";
    if (c.plan.contains("proof") && c.plan["proof"].is_object()) {
      const auto& p = c.plan["proof"];
      if (p.contains("near_miss") && p["near_miss"].is_string()) why = "the nearest, " + p["near_miss"].get<std::string>();
      else if (p.contains("not_run_because") && p["not_run_because"].is_string()) why = "semantics unproven: " + p["not_run_because"].get<std::string>();
    }
    throw Error(ErrorCode::kBadInput, "kwiki has no V0 for this task (" + why + "). kernel_abi.h in the workspace is the launcher a kernel "
                                      "of yours implements: pass it with --kernel FILE.cu, or a Python Model with --kernel FILE.py",
                c.plan_path.string());
  }
  if (c.binding.is_null()) c.binding = c.family.empty() ? generic_binding(c) : c.plan["family"]["binding"];
  c.binding["family"] = c.family.empty() ? std::string("generic") : c.family;

  // The GPU source: the family's template, or the user's file (copied in, never over kernel.cu).
  c.kernel_path = c.ws / (c.amd ? "kernel.hip" : "kernel.cu");
  if (c.candidate == Candidate::kTemplate && c.family == "generated") {
    // The generator's kernel: written from the plan's IR for the target, and for the CPU.
    const ordered_json ir = ordered_json::parse(read_text(c.ws / "plans" / "kernel_ir.json"), nullptr, false);
    gen::Kernel k;
    try {
      k = gen::Kernel::from_json(ir);
    } catch (const std::exception& e) {
      throw Error(ErrorCode::kBadInput, std::string("plans/kernel_ir.json is not a kernel IR kwiki wrote (") + e.what() + "); run `kwiki plan` again",
                  (c.ws / "plans" / "kernel_ir.json").string());
    }
    if (k.size_exprs.size() != k.sizes.size()) throw Error(ErrorCode::kBadInput, "plans/kernel_ir.json has no fitted sizes; run `kwiki plan` again");
    c.cpu_source = gen::emit_source(k, gen::Backend::kCpu);
    write_generated(c, "kernel_cpu.cpp", c.cpu_source);
    c.cpu_source = read_text(c.ws / "kernel_cpu.cpp");
    if (c.dsl) {
      // kernel.py is the DSL kernel itself (written below, after the harness files).
      const ordered_json* traced = first_traced_shape(c);
      const std::string returns = traced ? traced->value("returns", std::string("tensor")) : "tensor";
      c.source = c.header.framework == "cutedsl" ? gen::emit_cutedsl_model(k, returns, c.header.target) : gen::emit_flydsl_model(k, returns, c.header.target);
    } else if (!c.cpu) {
      const std::string body = gen::emit_source(k, c.amd ? gen::Backend::kHip : gen::Backend::kCuda);
      const std::string head = "// V0 kernel written by kwiki's generator from plans/kernel_ir.json (launcher ABI v1: dims are the IR's size slots,\n"
                               "// params its floats). Edit freely and rerun `kwiki baseline --kernel kernel." + std::string(c.amd ? "hip" : "cu") + "`.\n";
      write_generated(c, c.kernel_path.filename().string(), head + inline_compat(body));
      c.source = read_text(c.kernel_path);
    }
  } else if (c.candidate == Candidate::kTemplate && c.dsl) {
    // A family's hand-written DSL V0 (its row's dsl_frameworks), filled with the binding below.
    const FamilyRow* row = find_family(c.family);
    if (!row || !family_has_dsl_kernel(*row, c.header.framework)) {
      std::string with;
      for (std::size_t i = 0; i < kFamilyCount; ++i)
        if (family_has_dsl_kernel(kFamilies[i], c.header.framework)) with += std::string(with.empty() ? "" : ", ") + kFamilies[i].name;
      throw Error(ErrorCode::kBadInput, std::string("kwiki writes ") + detail::find_framework(c.header.framework)->language +
                                            " V0s from its generator's IR" + (with.empty() ? "" : " and for the families " + with) +
                                            ", and this plan claims the " + c.family + " template: plan again with --pattern generated, or with --framework " +
                                            (c.amd ? "hip" : "cuda"),
                  c.plan_path.string(), "/target/framework");
    }
    c.source = embedded_file(dsl_kernel_file(*row, c.header.framework));
    if (c.source.empty()) throw Error(ErrorCode::kBadInput, "this kwiki carries no " + dsl_kernel_file(*row, c.header.framework), c.plan_path.string());
  } else if (c.candidate == Candidate::kTemplate && !c.cpu) {
    c.source = template_source(c.family, c.header.dtype, c.header.vendor);
    if (c.source.empty()) throw Error(ErrorCode::kBadInput, "kwiki has no kernel template for family " + c.family, c.plan_path.string());
    write_generated(c, c.kernel_path.filename().string(), c.source);
    c.source = read_text(c.kernel_path);  // the user's edit, when there is one, is what gets built
  } else if (c.candidate == Candidate::kUserGpu) {
    c.source = read_text(kernel);
    if (c.source.find("kwiki_launch") == std::string::npos)
      throw Error(ErrorCode::kBadInput, "the kernel defines no kwiki_launch (the launcher of kernel_abi.h)", kernel);
    const fs::path inside = c.ws / ("user_kernel" + std::string(c.amd ? ".hip" : ".cu"));
    if (fs::absolute(kernel) != fs::absolute(c.kernel_path)) {
      if (fs::absolute(kernel) != fs::absolute(inside)) write_text(inside, c.source);
      c.kernel_path = inside;
    }
  }
  c.result.kernel_path = c.kernel_path.string();

  // kernel.py and the harness.
  const ordered_json* traced = first_traced_shape(c);
  ordered_json names = ordered_json::array();
  if (traced)
    for (const auto& t : (*traced)["outputs"]) names.push_back(t["name"]);
  // The Models' slots: the plan's binding, the reference's return form and output names, the target.
  const auto fill = [&](std::string text) {
    text = replace_all(text, "@BINDING@", c.binding.dump());
    text = replace_all(text, "@FORM@", traced ? traced->value("returns", std::string("tensor")) : "tensor");
    text = replace_all(text, "@OUTPUT_NAMES@", names.dump());
    return replace_all(text, "@TARGET@", c.header.target);
  };
  const std::string model = fill(embedded_file("kernel_model.py"));
  if (c.dsl && c.candidate == Candidate::kTemplate) {
    // kernel.py launches the DSL kernel; the ABI launcher's Model (the CPU twin on --device cpu) is kernel_twin.py.
    write_generated(c, "kernel.py", c.family == "generated" ? c.source : fill(c.source));
    c.source = read_text(c.ws / "kernel.py");
    c.kernel_path = c.ws / "kernel.py";
    c.result.kernel_path = c.kernel_path.string();
    write_generated(c, "kernel_twin.py", model);
  } else {
    write_generated(c, "kernel.py", model);
  }
  write_generated(c, "test_kernel.py", embedded_file("test_kernel.py"));
  write_generated(c, "kwiki_device.py", planner_file("kwiki_device.py"));
  write_generated(c, "kwiki_families.py", planner_file("kwiki_families.py"));
  write_generated(c, "kernel_abi.h", abi_header(c));
  if (!fs::exists(c.ws / "reference.py") && fs::exists(c.ws / "task" / "reference.py")) fs::copy_file(c.ws / "task" / "reference.py", c.ws / "reference.py");
  c.python_model = c.ws / (c.dsl && c.cpu && c.candidate == Candidate::kTemplate ? "kernel_twin.py" : "kernel.py");
  if (c.candidate == Candidate::kUserPython) {
    const fs::path inside = c.ws / "user_model.py";
    if (fs::absolute(kernel) != fs::absolute(inside)) write_text(inside, read_text(kernel));
    c.python_model = inside;
    c.result.kernel_path = inside.string();
  }
}

// ---- run: the harness where the candidate can run ----

// Twice the largest cache the plan cites (L2, or AMD's Infinity Cache), in bytes.
long long flush_bytes(const ordered_json& plan) {
  double mb = 0;
  for (const auto& f : plan.value("hardware_facts", ordered_json::array()))
    if (f.is_object() && f.value("value", ordered_json()).is_number()) {
      const std::string metric = f.value("metric", "");
      if (metric == "L2" || metric.rfind("last-level cache", 0) == 0) mb = std::max(mb, f["value"].get<double>());
    }
  return static_cast<long long>(2 * mb * 1024 * 1024);
}

void run(Context& c) {
  BaselineResult& r = c.result;
  if (!r.compiled) return;
  const std::string python = find_python();
  if (c.cpu) {
    c.device_label = "CPU: the family's twin through the harness (correctness only; no GPU figures)";
  } else {
    const Device device = c.amd ? Device{} : detect_nvidia_device();
    if (!device.present) {
      r.not_measured_because = c.amd ? "no AMD GPU" : "no NVIDIA GPU on this machine";
      return;
    }
    if (!device_matches(device.name, c.header.product) && !c.request.allow_other_device) {
      r.not_measured_because = "the GPU here is " + device.name + ", not the plan's " + c.header.product + " (pass --allow-other-device to run anyway)";
      return;
    }
    c.device_label = device.name + " (" + device.uuid + ")" + (device_matches(device.name, c.header.product) ? "" : " [not the plan's product]");
  }
  if (!run_tool({python, "-c", "import torch"}, 120).ok()) {
    r.not_measured_because = "torch is not importable by " + python + " here, so the reference cannot run (set KWIKI_PYTHON)";
    c.device_label.clear();
    return;
  }
  std::string shapes;
  for (const auto& s : c.request.shape_ids) shapes += (shapes.empty() ? "" : ",") + s;
  ProcessSpec harness;
  harness.argv = {python, "test_kernel.py", "--version", "v0", "--device", c.cpu ? "cpu" : "cuda"};
  if (!shapes.empty()) harness.argv.insert(harness.argv.end(), {"--shapes", shapes});
  if (!c.request.timing) harness.argv.push_back("--no-timing");
  harness.cwd = c.ws.string();
  harness.set_env = {{"KWIKI_KERNEL_SO", (c.ws / "build" / "kernel.so").string()},
                     {"KWIKI_TWIN_SO", (c.ws / "build" / "kernel_cpu.so").string()},
                     {"KWIKI_KERNEL_PY", c.python_model.string()},
                     {"KWIKI_FLUSH_BYTES", std::to_string(flush_bytes(c.plan))},
                     {"TEST_TIMEOUT_SEC", std::to_string(c.request.timeout_sec)}};
  // The harness bounds each case itself; this bounds the whole run (a hung import, a wedged device).
  const std::size_t cases = std::max<std::size_t>(1, c.request.shape_ids.empty() ? c.plan["shapes"].size() : c.request.shape_ids.size());
  harness.timeout_seconds = 120.0 + 4.0 * c.request.timeout_sec * static_cast<double>(cases);
  const ProcessResult run_result = run_process(harness);
  const std::string log =
      run_result.started ? run_result.out + (run_result.timed_out ? "\nkwiki: the harness was stopped at its deadline\n" : "") : run_result.error;
  write_text(c.profiles / "test_kernel.log", log);
  const auto pos = log.rfind("[test_kernel] RESULT_JSON=");
  if (pos != std::string::npos) {
    std::string line = log.substr(pos + 26);
    line = line.substr(0, line.find('\n'));
    r.result_json = ordered_json::parse(line, nullptr, false);  // no exceptions: a bad line is a RUNTIME_FAIL
  }
  const bool well_formed = !r.result_json.is_discarded() && r.result_json.is_object() && r.result_json.contains("all_pass") &&
                           r.result_json["all_pass"].is_boolean();
  if (pos == std::string::npos || !well_formed) {
    r.result_json = ordered_json();
    r.status = "RUNTIME_FAIL";
    r.exit_code = 4;
    r.notes.push_back(pos == std::string::npos ? "the harness printed no RESULT_JSON: see profiles/v0/test_kernel.log"
                                               : "the harness's RESULT_JSON line is not a valid result: see profiles/v0/test_kernel.log");
    return;
  }
  r.measured = !c.cpu && !r.result_json["latency_us_by_shape"].empty();
  r.status = r.result_json["all_pass"].get<bool>() ? "PASS" : "MISMATCH";
  for (const auto& f : r.result_json["failures"])
    if (f["status"] != "MISMATCH") r.status = f["status"];
  r.exit_code = r.status == "PASS" ? 0 : 1;
  if (!c.cpu && !c.request.timing) r.not_measured_because = "--no-timing: checked for correctness only";
  if (c.cpu) {
    r.not_measured_because = "--device cpu: the CPU twin was checked for correctness; nothing was timed";
    r.notes.push_back("CPU twin through the harness: " + r.status + " (correctness only)");
  }
}

// ---- commit ----

void commit(Context& c) {
  if (!c.request.commit || !fs::exists(c.ws / ".git")) return;
  MemoryStore memory(c.ws.string());
  const auto commit = [&](const char* message) {
    // Temporaries and the lock stay out even in a workspace whose .gitignore predates them.
    return run_git(c.ws.string(), {"add", "-A", "--", ".", ":(exclude)*.kwiki-tmp-*", ":(exclude)*.kwiki-lock"}).ok() &&
           run_git(c.ws.string(), {"commit", "-qm", message}).ok();
  };
  if (commit(c.cpu ? "V0: CPU twin checked" : "V0: baseline kernel")) {
    const std::string hash = run_git(c.ws.string(), {"rev-parse", "HEAD"}).out.substr(0, 40);
    memory.update("v0", {{"git_commit_hash", hash}});
    commit("V0: memory/v0.json");
  } else {
    c.result.notes.push_back("git commit failed in the workspace");
  }
}

// ---- read the workspace ----

void read_workspace(Context& c) {
  c.ws = fs::absolute(c.request.workspace);
  c.plan_path = c.ws / "plans" / "v0_plan.json";
  c.profiles = c.ws / "profiles" / "v0";
  if (!fs::exists(c.plan_path)) throw Error(ErrorCode::kBadInput, "no plans/v0_plan.json here: run `kwiki plan` first", c.ws.string());
  try {
    c.plan = ordered_json::parse(read_text(c.plan_path));
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kInvalidJson, std::string("the plan is not valid JSON: ") + e.what(), c.plan_path.string());
  }
  c.header = read_plan_header(c.plan, c.plan_path);
  c.amd = c.header.vendor == "amd";
  c.cpu = c.request.device == "cpu";
  c.dsl = !detail::find_framework(c.header.framework)->native;
  if (c.request.device != "gpu" && c.request.device != "cpu") throw Error(ErrorCode::kUsage, "--device is gpu or cpu");
  c.graph = ordered_json::parse(read_text(c.ws / "plans" / "graph.json"), nullptr, false);
  if (c.plan.contains("family") && c.plan["family"].is_object()) {
    const std::string name = c.plan["family"].value("name", "");
    const FamilyRow* row = find_family(name);
    if (!row) throw Error(ErrorCode::kBadInput, "the plan names family \"" + name + "\", which kwiki does not have", c.plan_path.string(), "/family/name");
    c.family = row->name;
  }
  fs::create_directories(c.profiles);
}

BaselineResult baseline_stages(const BaselineRequest& request) {
  Context c(request);
  constexpr int kSteps = 6;
  auto stage = [&](int step, const char* what) {
    if (request.progress) request.progress(step, kSteps, what);
  };
  stage(1, "reading the workspace's plan");
  read_workspace(c);
  stage(2, "writing the candidate kernel and its harness");
  generate(c);
  stage(3, c.cpu ? "building the CPU twin" : "building the kernel");
  build_stage(c);
  stage(4, "running the harness: correctness per shape, then timing");
  run(c);
  BaselineResult& r = c.result;
  if (r.status.empty()) {
    r.status = "NOT_RUN";
    // Not compiled because the toolchain is absent is "not measured", not a failure.
    r.exit_code = r.compiled || !c.skip_compile.empty() ? kExitNotMeasured : 4;
    if (r.not_measured_because.empty()) r.not_measured_because = r.notes.empty() ? "not compiled" : r.notes.back();
  }
  r.static_evidence = c.evidence;
  stage(5, "writing baseline_report.md and memory/v0.json");
  report_stage(c);
  stage(6, request.commit ? "committing the workspace" : "done (no commit)");
  commit(c);
  return r;
}

}  // namespace

std::vector<std::string> template_patterns() {
  std::vector<std::string> out;
  for (const detail::EmbeddedFile* f = detail::kBaselineFiles; f->name; ++f) {
    const std::string n = f->name;
    if (n.size() > 4 && n.ends_with(".cuh") && !n.starts_with("kwiki_")) out.push_back(n.substr(0, n.size() - 4));
  }
  return out;
}

namespace detail {
namespace {
// The embedded header a line includes ("#include \"name.cuh\""), or "" when it includes none of kwiki's.
std::string included_template(const std::string& line) {
  const std::size_t hash = line.find_first_not_of(" \t");
  if (hash == std::string::npos || line.compare(hash, 8, "#include") != 0) return "";
  const std::size_t open = line.find('"', hash), close = open == std::string::npos ? open : line.find('"', open + 1);
  if (close == std::string::npos) return "";
  const std::string name = line.substr(open + 1, close - open - 1);
  return name.ends_with(".cuh") && !embedded_file(name).empty() ? name : "";
}

// source with each of kwiki's headers it includes (directly or through another) inlined at its first include.
void inline_templates(const std::string& source, std::set<std::string>& done, std::string& out) {
  std::stringstream ss(source);
  for (std::string line; std::getline(ss, line);) {
    const std::string name = included_template(line);
    if (name.empty()) {
      out += line + "\n";
    } else if (done.insert(name).second) {
      out += "// ---- " + name + " (inlined) ----\n";
      inline_templates(embedded_file(name), done, out);
      out += "// ---- end of " + name + " ----\n";
    }
  }
}
}  // namespace

std::string inline_compat(const std::string& source) {
  std::set<std::string> done;
  std::string inlined;
  inline_templates(source, done, inlined);
  return inlined;
}
}  // namespace detail

std::string template_source(const std::string& pattern, const std::string& dtype, const std::string& vendor) {
  const std::string body = detail::embedded_file(pattern + ".cuh");
  if (body.empty()) return {};
  const std::string inlined = detail::inline_compat(body);
  std::string out = "// V0 " + pattern + " kernel generated by kwiki baseline from its template (launcher ABI v1).\n";
  out += "// Element type and launcher are fixed here; edit freely and rerun `kwiki baseline --kernel kernel." +
         std::string(vendor == "amd" ? "hip" : "cu") + "`.\n";
  out += "#define KWIKI_T " + element_type(dtype, vendor) + "\n#define KWIKI_DEFINE_LAUNCHER 1\n\n" + inlined;
  return out;
}

nlohmann::ordered_json baseline_result_json(const BaselineRequest& request, const BaselineResult& r, bool brief) {
  using ordered_json = nlohmann::ordered_json;
  ordered_json j;
  j["workspace"] = request.workspace;
  j["kernel"] = r.kernel_path;
  j["compiled"] = r.compiled;
  j["measured"] = r.measured;
  j["status"] = r.status;
  j["not_measured_because"] = r.not_measured_because.empty() ? ordered_json() : ordered_json(r.not_measured_because);
  j["report"] = "baseline_report.md";
  if (!brief) {
    j["static_evidence"] = r.static_evidence;
    j["result"] = r.result_json;
  } else if (r.result_json.is_object()) {
    // The RESULT_JSON lines an agent decides on; the whole is in profiles/v0/test_kernel.log.
    ordered_json summary;
    for (const char* key : {"all_pass", "statuses", "failures", "latency_us_geomean", "speedup_vs_ref_geomean", "max_abs_err", "max_rel_err", "device"})
      if (r.result_json.contains(key)) summary[key] = r.result_json[key];
    j["result"] = std::move(summary);
  } else {
    j["result"] = nullptr;
  }
  j["notes"] = r.notes;
  return j;
}

BaselineResult run_baseline(const BaselineRequest& request) {
  try {
    return baseline_stages(request);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kBadInput, std::string("plans/v0_plan.json is not a plan this kwiki wrote (") + e.what() + "); run `kwiki plan` again",
                (fs::absolute(request.workspace) / "plans" / "v0_plan.json").string());
  }
}

}  // namespace kwiki
