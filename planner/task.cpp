// Reads kernel tasks: the benchmark directory layout and task.json, with clear errors.
#include <re2/re2.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "task_parse.hpp"

#include "dtype.hpp"
#include "file_util.hpp"
#include "json_args.hpp"
#include "kwiki/error.hpp"
#include "kwiki/planner.hpp"

namespace kwiki {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string read_file(const std::string& path) {
  try {
    return detail::read_file(path);
  } catch (const Error&) {
    throw Error(ErrorCode::kBadInput, "cannot read the file; check that it exists and is readable", path);
  }
}

// Task files are other people's text: nesting is bounded before parsing, errors name the file.
json parse_json(const std::string& text, const std::string& path) {
  if (detail::json_nesting_depth(text) > detail::kMaxJsonDepth)
    throw Error(ErrorCode::kBadInput, "the file nests deeper than " + std::to_string(detail::kMaxJsonDepth) + " levels", path);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number past double's range
    throw Error(ErrorCode::kInvalidJson, std::string("malformed JSON: ") + e.what(), path);
  }
}

// Canonical size names and the spellings tasks use for them.
const std::vector<std::pair<std::string, std::vector<std::string>>> kDimAliases = {
    {"num_tokens", {"num_tokens", "tokens", "n_tokens", "m", "M", "num_rows", "rows"}},
    {"hidden_size", {"hidden_size", "hidden", "hidden_dim", "d_model", "dim", "n_cols", "cols", "width"}},
    {"intermediate_size", {"intermediate_size", "intermediate", "d_ff"}},
    {"in_features", {"in_features", "k", "K"}},
    {"out_features", {"out_features", "n", "N"}},
    {"num_seqs", {"num_seqs", "batch_size", "batch", "num_sequences"}},
    {"num_q_heads", {"num_q_heads", "num_heads", "q_heads", "num_query_heads"}},
    {"num_kv_heads", {"num_kv_heads", "kv_heads", "num_key_value_heads"}},
    {"head_size", {"head_size", "head_dim"}},
    {"block_size", {"block_size", "page_size"}},
    {"context_len", {"context_len", "seq_len", "context_length", "kv_len"}},
    {"num_experts", {"num_experts", "experts"}},
    {"topk", {"topk", "top_k"}},
};

void read_dims(ShapeCase& shape) {
  for (const json* kwargs : {&shape.init_kwargs, &shape.input_kwargs}) {
    for (const auto& [canonical, spellings] : kDimAliases) {
      for (const auto& spelling : spellings) {
        auto it = kwargs->find(spelling);
        if (it != kwargs->end() && it->is_number()) {
          shape.dims[canonical] = it->get<double>();
          break;
        }
      }
    }
  }
}

void read_shape_kwargs(ShapeCase& shape, const json& value, const std::string& file, const std::string& pointer) {
  if (!value.is_object()) throw Error(ErrorCode::kSchemaViolation, "a shape must be an object", file, pointer);
  for (const char* key : {"init_kwargs", "input_kwargs"}) {
    auto it = value.find(key);
    if (it == value.end() || it->is_null()) continue;  // absent or null: no arguments
    if (!it->is_object()) throw Error(ErrorCode::kSchemaViolation, std::string(key) + " must be an object or null", file, pointer + "/" + key);
    (std::string(key) == "init_kwargs" ? shape.init_kwargs : shape.input_kwargs) = *it;
  }
}

// A string member, its fallback when absent; another type is the file's error.
std::string string_member(const json& doc, const char* key, const std::string& fallback, const std::string& path) {
  const auto it = doc.find(key);
  if (it == doc.end() || it->is_null()) return fallback;
  if (!it->is_string()) throw Error(ErrorCode::kSchemaViolation, std::string(key) + " must be a string", path, std::string("/") + key);
  return it->get<std::string>();
}

// roofline.json's counts are numbers where the planner reads them: anything else is the file's error.
json checked_roofline(json doc, const std::string& path) {
  if (!doc.is_object()) throw Error(ErrorCode::kSchemaViolation, "roofline.json must be an object", path, "/");
  const auto shapes = doc.find("shapes");
  if (shapes == doc.end()) return doc;
  if (!shapes->is_object()) throw Error(ErrorCode::kSchemaViolation, "\"shapes\" must be an object of shape id -> counts", path, "/shapes");
  for (const auto& [id, counts] : shapes->items()) {
    const std::string at = "/shapes/" + id;
    if (!counts.is_object()) throw Error(ErrorCode::kSchemaViolation, "a shape's counts must be an object", path, at);
    for (const char* key : {"semantic_Q_read_bytes", "semantic_Q_write_bytes"})
      if (counts.contains(key) && !counts[key].is_number())
        throw Error(ErrorCode::kSchemaViolation, std::string(key) + " must be a number", path, at + "/" + key);
    if (const auto flops = counts.find("semantic_W_flops"); flops != counts.end()) {
      if (!flops->is_object()) throw Error(ErrorCode::kSchemaViolation, "semantic_W_flops must be an object of dtype -> FLOPs", path, at + "/semantic_W_flops");
      for (const auto& [dtype, n] : flops->items())
        if (!n.is_number()) throw Error(ErrorCode::kSchemaViolation, "FLOPs must be numbers", path, at + "/semantic_W_flops/" + dtype);
    }
  }
  return doc;
}

// Keyword parameters of `def _make_inputs(...)`; has_var_kwargs when it takes **kwargs.
std::set<std::string> factory_parameters(const std::string& source, bool& found, bool& has_var_kwargs) {
  std::set<std::string> names;
  std::string params;
  static const RE2 kDef(R"(def\s+_make_inputs\s*\(([^)]*)\))");
  found = RE2::PartialMatch(source, kDef, &params);
  has_var_kwargs = params.find("**") != std::string::npos;
  std::stringstream ss(params);
  for (std::string item; std::getline(ss, item, ',');) {
    const auto start = item.find_first_not_of(" \t\n*");
    if (start == std::string::npos) continue;
    std::string name = item.substr(start);
    name = name.substr(0, name.find_first_of(" \t\n:="));
    if (!name.empty() && name != "self") names.insert(name);
  }
  return names;
}

Task load_benchmark_dir(const std::string& dir) {
  detail::BenchmarkFiles files;
  files.dir = dir;
  for (const char* required : {"reference.py", "input.py", "shapes.json"})
    if (!fs::exists(dir + "/" + required))
      throw Error(ErrorCode::kBadInput, std::string("the task has no ") + required + " (benchmark layout needs reference.py, input.py, shapes.json)",
                  dir + "/" + required);
  files.reference = read_file(dir + "/reference.py");
  files.factory = read_file(dir + "/input.py");
  files.shapes = read_file(dir + "/shapes.json");
  if (fs::exists(dir + "/metadata.json")) files.metadata = read_file(dir + "/metadata.json");
  if (fs::exists(dir + "/roofline.json")) files.roofline = read_file(dir + "/roofline.json");
  return detail::parse_benchmark_task(files);
}

Task load_task_json(const std::string& path) { return detail::parse_task_json(path, read_file(path)); }

}  // namespace

namespace detail {

Task parse_benchmark_task(const BenchmarkFiles& files) {
  const std::string& dir = files.dir;
  Task task;
  task.path = dir;
  task.form = "benchmark";
  task.name = fs::path(dir).filename().string();
  if (task.name.empty()) task.name = fs::path(dir).parent_path().filename().string();
  task.reference = dir + "/reference.py";
  task.factory = dir + "/input.py";
  if (files.reference.find("class Model") == std::string::npos)
    throw Error(ErrorCode::kBadInput, "reference.py defines no `class Model(torch.nn.Module)`", task.reference);
  bool found = false, var_kwargs = false;
  const auto params = factory_parameters(files.factory, found, var_kwargs);
  if (!found) throw Error(ErrorCode::kBadInput, "input.py defines no `def _make_inputs(**input_kwargs)` factory", task.factory);

  const std::string shapes_path = dir + "/shapes.json";
  const json shapes = parse_json(files.shapes, shapes_path);
  if (!shapes.is_object() || shapes.empty())
    throw Error(ErrorCode::kSchemaViolation, "shapes.json must be a non-empty object of shape id -> {init_kwargs, input_kwargs}", shapes_path, "/");
  for (const auto& [id, value] : shapes.items()) {
    ShapeCase shape;
    shape.id = id;
    read_shape_kwargs(shape, value, shapes_path, "/" + id);
    if (!var_kwargs) {
      for (const auto& [key, v] : shape.input_kwargs.items())
        if (!params.contains(key))
          throw Error(ErrorCode::kBadInput,
                      "shape \"" + id + "\" passes " + key + " but input.py's _make_inputs takes no such parameter", shapes_path,
                      "/" + id + "/input_kwargs/" + key);
    }
    read_dims(shape);
    task.shapes.push_back(std::move(shape));
  }
  if (files.metadata) {
    task.metadata = parse_json(*files.metadata, dir + "/metadata.json");
    if (!task.metadata.is_object()) throw Error(ErrorCode::kSchemaViolation, "metadata.json must be an object", dir + "/metadata.json", "/");
    if (task.metadata.contains("dtype") && task.metadata["dtype"].is_string()) task.dtype = task.metadata["dtype"];
    if (task.metadata.contains("pattern") && task.metadata["pattern"].is_string()) task.pattern_hint = task.metadata["pattern"];
    if (task.metadata.contains("id") && task.metadata["id"].is_string()) task.name = task.metadata["id"];
    if (auto s = task.metadata.find("shapes"); s != task.metadata.end() && s->is_object()) {
      for (const auto& [id, info] : s->items()) {
        bool known = false;
        for (auto& shape : task.shapes) {
          if (shape.id != id) continue;
          known = true;
          if (info.is_object() && info.contains("description") && info["description"].is_string()) shape.description = info["description"];
        }
        if (!known)
          throw Error(ErrorCode::kBadInput, "metadata.json describes shape \"" + id + "\" that shapes.json does not define",
                      dir + "/metadata.json", "/shapes/" + id);
      }
    }
  }
  if (files.roofline) task.roofline = checked_roofline(parse_json(*files.roofline, dir + "/roofline.json"), dir + "/roofline.json");
  return task;
}

Task parse_task_json(const std::string& path, const std::string& text) {
  Task task;
  task.path = path;
  task.form = "task.json";
  const json doc = parse_json(text, path);
  if (!doc.is_object()) throw Error(ErrorCode::kSchemaViolation, "task.json must be an object", path, "/");
  task.name = string_member(doc, "name", fs::path(path).parent_path().filename().string(), path);
  task.pattern_hint = string_member(doc, "pattern", "", path);
  task.dtype = string_member(doc, "dtype", "bf16", path);
  if (doc.contains("params")) {
    if (!doc["params"].is_object()) throw Error(ErrorCode::kSchemaViolation, "params must be an object", path, "/params");
    task.params = doc["params"];
  }
  if (doc.contains("reference")) {
    if (!doc["reference"].is_string()) throw Error(ErrorCode::kSchemaViolation, "reference must be a path", path, "/reference");
    task.reference = (fs::path(path).parent_path() / doc["reference"].get<std::string>()).string();
    if (!fs::exists(task.reference)) throw Error(ErrorCode::kBadInput, "the reference it names does not exist", task.reference);
  }
  auto shapes = doc.find("shapes");
  if (shapes == doc.end() || !shapes->is_object() || shapes->empty())
    throw Error(ErrorCode::kSchemaViolation, "task.json needs a non-empty \"shapes\" object", path, "/shapes");
  for (const auto& [id, value] : shapes->items()) {
    if (!value.is_object()) throw Error(ErrorCode::kSchemaViolation, "a shape must be an object of sizes", path, "/shapes/" + id);
    ShapeCase shape;
    shape.id = id;
    shape.init_kwargs = task.params;
    shape.input_kwargs = value;
    read_dims(shape);
    if (shape.dims.empty())
      throw Error(ErrorCode::kSchemaViolation, "shape \"" + id + "\" names no size kwiki knows (tokens, hidden, ...)", path, "/shapes/" + id);
    task.shapes.push_back(std::move(shape));
  }
  return task;
}

}  // namespace detail

Task load_task(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error(ErrorCode::kBadInput, "task not found: give a benchmark task folder or a task.json", path);
  Task task = fs::is_directory(path, ec) ? (fs::exists(path + "/task.json") && !fs::exists(path + "/shapes.json") ? load_task_json(path + "/task.json")
                                                                                                            : load_benchmark_dir(path))
                                         : load_task_json(path);
  const auto dtype = detail::canonical_dtype(task.dtype);
  if (!dtype) {
    std::string known;
    for (const auto& row : detail::kDtypes) known += std::string(known.empty() ? "" : ", ") + row.name;
    throw Error(ErrorCode::kBadInput, "unknown dtype \"" + task.dtype + "\" (known: " + known + ", and torch's spellings of them)", task.path, "/dtype");
  }
  task.dtype = *dtype;
  return task;
}

}  // namespace kwiki
