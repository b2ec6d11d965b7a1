// The trace: runs a task's reference under trace_task.py and reads back what it recorded.
#include "trace.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "dtype.hpp"
#include "embedded_files.hpp"
#include "file_util.hpp"
#include "kwiki/error.hpp"
#include "subprocess.hpp"

namespace kwiki::detail {

extern const EmbeddedFile kPlannerFiles[];

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TracedTensor read_tensor(const json& j) {
  TracedTensor t;
  t.name = j.value("name", "");
  t.kind = j.value("kind", "");
  t.is_tensor = j.contains("shape");
  if (t.is_tensor) {
    for (const auto& d : j["shape"]) t.shape.push_back(d.get<long long>());
    t.dtype = j.value("dtype", "");
  } else {
    t.value = j.value("value", json());
    t.dtype = j.value("python", "");
  }
  t.file = j.value("file", "");
  t.storage = j.value("storage", "");
  t.updated = j.value("updated", false);
  t.alias_of = j.value("alias_of", "");
  t.graph_name = j.value("graph_name", "");
  if (const auto st = j.find("stride"); st != j.end() && st->is_array())
    for (const auto& d : *st)
      if (d.is_number_integer()) t.stride.push_back(d.get<long long>());
  // A file name is the trace's own (t<N>.bin); anything else is not read.
  if (t.file.find('/') != std::string::npos || t.file.find("..") != std::string::npos) t.file.clear();
  return t;
}

std::vector<TracedTensor> read_tensors(const json& list) {
  std::vector<TracedTensor> out;
  if (list.is_array())
    for (const auto& j : list)
      if (j.is_object()) out.push_back(read_tensor(j));
  return out;
}

std::vector<TensorSpec> specs_of(const std::vector<TracedTensor>& tensors) {
  std::vector<TensorSpec> out;
  for (const auto& t : tensors) {
    if (!t.is_tensor) continue;
    TensorSpec s;
    s.name = t.name;
    s.shape = t.shape;
    s.dtype = t.dtype;
    s.updated = t.updated;
    s.alias_of = t.alias_of;
    out.push_back(std::move(s));
  }
  return out;
}

void read_shape(ShapeTrace& s, const json& entry) {
  if (const auto small = entry.find("small"); small != entry.end() && small->is_object()) {
    s.ok = true;
    s.factor = small->value("factor", 1);
    s.small_init_kwargs = small->value("init_kwargs", json::object());
    s.small_input_kwargs = small->value("input_kwargs", json::object());
    s.form = small->value("form", "tensor");
    s.inputs = read_tensors(small->value("inputs", json::array()));
    s.params = read_tensors(small->value("params", json::array()));
    s.outputs = read_tensors(small->value("outputs", json::array()));
    s.updated = read_tensors(small->value("updated", json::array()));
    s.graph = small->value("graph", json::object());
    s.proof = small->value("proof", json::array());
  } else if (const auto e = entry.find("small_error"); e != entry.end() && e->is_object()) {
    s.error = e->value("stage", "reference.py") + ": " + e->value("message", "");
  }
  if (const auto real = entry.find("real"); real != entry.end() && real->is_object()) {
    s.real_ok = true;
    s.real_device = real->value("device", "");
    s.real_inputs = read_tensors(real->value("inputs", json::array()));
    s.real_outputs = read_tensors(real->value("outputs", json::array()));
    s.real_params = read_tensors(real->value("params", json::array()));
    s.real_graph = real->value("graph", json::object());
    if (const auto f = real->find("flops"); f != real->end() && f->is_object()) {
      s.real_matrix_flops = f->value("matrix", 0.0);
      s.real_vector_flops = f->value("vector", 0.0);
    }
  } else if (const auto e = entry.find("real_error"); e != entry.end() && e->is_object()) {
    s.real_error = e->value("stage", "reference.py") + ": " + e->value("message", "");
  }
}

// Whether an interpreter imports torch, and its version.
std::optional<std::string> torch_version_of(const std::string& python, std::string& said) {
  ProcessSpec spec;
  spec.argv = {python, "-c", "import torch; print(torch.__version__)"};
  spec.environment = scrubbed_environment();
  spec.timeout_seconds = 120;
  spec.merge_stderr = false;
  const ProcessResult r = run_process(spec);
  if (!r.started) {
    said = r.error;
    return std::nullopt;
  }
  if (!r.ok()) {
    const std::string err = r.err.substr(r.err.rfind('\n', r.err.size() > 1 ? r.err.size() - 2 : 0) + 1);
    said = r.timed_out ? "importing torch did not finish in 120 s" : "no torch (" + err.substr(0, 160) + ")";
    return std::nullopt;
  }
  std::string version = r.out.substr(0, r.out.find('\n'));
  said = "torch " + version;
  return version;
}

}  // namespace

long long TracedTensor::numel() const {
  long long n = 1;
  for (long long d : shape) n *= d;
  return n;
}

std::string planner_file(const std::string& name) {
  for (const EmbeddedFile* f = kPlannerFiles; f->name; ++f)
    if (name == f->name) return f->text;
  return {};
}

const ShapeTrace* Trace::shape(const std::string& id) const {
  for (const auto& s : shapes)
    if (s.id == id) return &s;
  return nullptr;
}

nlohmann::ordered_json Trace::graph_json() const {
  nlohmann::ordered_json out;
  out["schema"] = "kwiki-graph-1";
  out["python"] = python;
  out["torch"] = torch_version;
  out["limitations"] = limitations;
  nlohmann::ordered_json shapes_json = nlohmann::ordered_json::object();
  for (const auto& s : shapes) {
    nlohmann::ordered_json j;
    if (!s.ok) {
      j["error"] = s.error;
      shapes_json[s.id] = j;
      continue;
    }
    auto list = [](const std::vector<TracedTensor>& tensors) {
      nlohmann::ordered_json a = nlohmann::ordered_json::array();
      for (const auto& t : tensors) {
        nlohmann::ordered_json e = {{"name", t.name}};
        if (t.is_tensor) e["shape"] = t.shape, e["dtype"] = t.dtype;
        else e["value"] = t.value;
        if (t.updated) e["updated_in_place"] = true;
        if (!t.alias_of.empty()) e["alias_of"] = t.alias_of;
        a.push_back(e);
      }
      return a;
    };
    j["traced_at"] = {{"shrink_factor", s.factor}, {"init_kwargs", s.small_init_kwargs}, {"input_kwargs", s.small_input_kwargs}};
    j["inputs"] = list(s.inputs);
    j["params"] = list(s.params);
    j["outputs"] = list(s.outputs);
    j["returns"] = s.form;
    j["ops"] = s.graph.value("ops", json::array());
    j["ops_truncated"] = s.graph.value("truncated", false);
    shapes_json[s.id] = j;
  }
  out["shapes"] = shapes_json;
  return out;
}

std::string find_python(std::vector<std::string>* tried) {
  if (const char* chosen = std::getenv("KWIKI_PYTHON"); chosen && *chosen) {
    if (tried) tried->push_back(std::string(chosen) + " ($KWIKI_PYTHON)");
    return chosen;
  }
  std::string first;
  std::vector<std::string> seen;
  for (const char* candidate : {"python3", "/usr/bin/python3", "python"}) {
    const std::string path = find_program(candidate);
    if (path.empty()) continue;
    std::error_code ec;
    const std::string real = fs::weakly_canonical(path, ec).string();
    if (std::find(seen.begin(), seen.end(), real) != seen.end()) continue;
    seen.push_back(real);
    if (first.empty()) first = path;
    std::string said;
    const bool has_torch = torch_version_of(path, said).has_value();
    if (tried) tried->push_back(path + ": " + said);
    if (has_torch) return path;
  }
  return first.empty() ? "python3" : first;
}

Trace trace_task(Task& task, const TraceOptions& options) {
  const std::string& dir = options.dir;
  const int timeout_seconds = options.timeout_seconds;
  Trace trace;
  trace.dir = dir;
  if (task.form != "benchmark") {
    trace.skipped_because = "a task.json task has no input factory to run";
    return trace;
  }
  trace.python = find_python(&trace.interpreters_tried);
  for (const char* name : {"trace_task.py", "kwiki_device.py", "kwiki_families.py"})
    write_file_atomically(dir + "/" + name, planner_file(name));
  ProcessSpec spec;
  spec.argv = {trace.python, dir + "/trace_task.py"};
  if (!options.twin_library.empty()) spec.argv.insert(spec.argv.end(), {"--twin", options.twin_library, "--families", options.families});
  spec.argv.insert(spec.argv.end(), {task.path, dir});
  for (const auto& s : task.shapes) spec.argv.push_back(s.id);
  spec.environment = scrubbed_environment();
  spec.set_env = {{"PYTHONDONTWRITEBYTECODE", "1"}};
  spec.timeout_seconds = timeout_seconds;
  spec.merge_stderr = false;  // the task's own prints stay out of the one JSON line
  const ProcessResult run = run_process(spec);
  if (!run.started) {
    trace.skipped_because = run.error + " (set KWIKI_PYTHON to an interpreter with torch)";
    return trace;
  }
  if (run.timed_out) {
    trace.skipped_because = "the trace did not finish within " + std::to_string(timeout_seconds) +
                            " s (reference.py or input.py still running; its process group was killed)";
    return trace;
  }
  // The result is the last line that parses: a task may print to stdout as it is imported.
  json doc;
  for (std::size_t end = run.out.size(); end > 0 && !doc.is_object();) {
    const std::size_t start = run.out.rfind('\n', end - 1);
    const std::size_t from = start == std::string::npos ? 0 : start + 1;
    doc = json::parse(run.out.substr(from, end - from), nullptr, false);
    if (!doc.is_object()) doc = json();
    end = start == std::string::npos ? 0 : start;
  }
  if (!doc.is_object()) {
    trace.skipped_because = trace.python + " printed no trace that parses (exit " + std::to_string(run.exit_code) + "): " +
                            (run.err.empty() ? run.out.substr(0, 200) : run.err.substr(run.err.size() > 400 ? run.err.size() - 400 : 0));
    return trace;
  }
  trace.python = doc.value("python", trace.python);
  trace.torch_version = doc["torch"].is_string() ? doc["torch"].get<std::string>() : "";
  for (const auto& l : doc.value("limitations", json::array()))
    if (l.is_string()) trace.limitations.push_back(l);
  if (doc.contains("skipped")) {
    trace.skipped_because = doc.value("skipped", std::string("skipped"));
    return trace;
  }
  // A module that does not import is no proof either way (often a torch too old for it: no
  // float8 dtypes): the plan says so and claims nothing, rather than refusing the task.
  if (const auto e = doc.find("error"); e != doc.end() && e->is_object()) {
    trace.skipped_because = "the task's modules do not import with torch " + trace.torch_version + ": " + e->value("message", "");
    return trace;
  }
  trace.ran = true;
  const json& shapes = doc.value("shapes", json::object());
  for (auto& shape : task.shapes) {
    ShapeTrace s;
    s.id = shape.id;
    if (const auto it = shapes.find(shape.id); it != shapes.end() && it->is_object()) read_shape(s, *it);
    else s.error = "the trace has no entry for this shape";
    if (s.real_ok) {
      shape.inputs = specs_of(s.real_inputs);
      shape.outputs = specs_of(s.real_outputs);
    }
    trace.shapes.push_back(std::move(s));
  }
  return trace;
}

std::vector<float> load_floats(const Trace& trace, const TracedTensor& t) {
  std::vector<float> out;
  if (t.file.empty()) return out;
  const std::string bytes = read_file(trace.dir + "/" + t.file);
  if (t.storage == "f32") {
    out.resize(bytes.size() / 4);
    std::memcpy(out.data(), bytes.data(), out.size() * 4);
  } else {
    for (long long v : load_integers(trace, t)) out.push_back(static_cast<float>(v));
  }
  return out;
}

std::vector<long long> load_integers(const Trace& trace, const TracedTensor& t) {
  std::vector<long long> out;
  if (t.file.empty()) return out;
  const std::string bytes = read_file(trace.dir + "/" + t.file);
  if (t.storage == "i64") {
    out.resize(bytes.size() / 8);
    std::memcpy(out.data(), bytes.data(), out.size() * 8);
  } else if (t.storage == "u8") {
    for (unsigned char c : bytes) out.push_back(c);
  } else {
    for (std::size_t i = 0; i + 4 <= bytes.size(); i += 4) {
      float f;
      std::memcpy(&f, bytes.data() + i, 4);
      out.push_back(static_cast<long long>(f));
    }
  }
  return out;
}

}  // namespace kwiki::detail
