// The dry run: executes a task's PyTorch reference once per shape to learn its true tensors.
#include "dry_run.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kwiki/error.hpp"

namespace kwiki::detail {
namespace {

namespace fs = std::filesystem;

// Loads the task's modules, runs each shape on the GPU when there is one, else on the meta
// device (shapes and dtypes without data), and prints one JSON object.
constexpr const char* kScript = R"PY(
import importlib.util, inspect, json, sys, traceback
try:
    import torch
except Exception as e:
    print(json.dumps({"skipped": "torch not importable: %s" % e})); sys.exit(0)
task_dir, shape_ids = sys.argv[1], sys.argv[2].split(",")
shapes = json.load(open(task_dir + "/shapes.json"))
def load(name):
    spec = importlib.util.spec_from_file_location("kwiki_task_" + name, task_dir + "/" + name + ".py")
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod); return mod
DT = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32", torch.int32: "int32", torch.int64: "int64",
      getattr(torch, "float8_e4m3fn", None): "fp8_e4m3fn", getattr(torch, "float8_e4m3fnuz", None): "fp8_e4m3fnuz", torch.bool: "bool"}
def desc(name, t):
    return {"name": name, "shape": list(t.shape), "dtype": DT.get(t.dtype, str(t.dtype))}
out = {"device": None, "shapes": {}}
try:
    ref, fac = load("reference"), load("input")
except Exception:
    print(json.dumps({"error": "import", "detail": traceback.format_exc(limit=3)})); sys.exit(0)
devices = ["cuda"] if torch.cuda.is_available() else ["meta", "cpu"]
for sid in shape_ids:
    spec = shapes[sid]; last = None
    for dev in devices:
        stage = "input.py"
        try:
            kw = dict(spec.get("input_kwargs", {}))
            if "device" in inspect.signature(fac._make_inputs).parameters: kw["device"] = dev
            inputs = fac._make_inputs(**kw)
            stage = "reference.py"
            model = ref.Model(**spec.get("init_kwargs", {})).to(dev)
            versions = {k: v._version for k, v in inputs.items() if torch.is_tensor(v)}
            with torch.no_grad():
                res = model(**inputs)
            pairs = [("out", res)] if torch.is_tensor(res) else (list(res.items()) if isinstance(res, dict) else [("out%d" % i, v) for i, v in enumerate(res)])
            outs = []
            for n, v in pairs:
                if not torch.is_tensor(v): continue
                d = desc(n, v)
                alias = [k for k, t in inputs.items() if t is v]
                if alias: d["alias_of"] = alias[0]  # an input returned after an in-place update
                outs.append(d)
            ins = []
            for k, v in inputs.items():
                if torch.is_tensor(v):
                    d = desc(k, v); d["updated"] = v._version != versions[k]; ins.append(d)
            for n, p in model.named_parameters(): ins.append(desc(n, p))
            out["device"] = dev
            out["shapes"][sid] = {"inputs": ins, "outputs": outs}; last = None; break
        except Exception as e:
            last = {"stage": stage, "error": "%s: %s" % (type(e).__name__, e)}
    if last is not None: out["shapes"][sid] = last
print(json.dumps(out))
)PY";

}  // namespace

DryRun dry_run(Task& task, int timeout_seconds) {
  DryRun result;
  if (task.form != "benchmark") {
    result.skipped_because = "a task.json task has no input factory to run";
    return result;
  }
  std::string ids;
  for (const auto& s : task.shapes) ids += (ids.empty() ? "" : ",") + s.id;
  const fs::path script = fs::temp_directory_path() / ("kwiki-dry-run-" + std::to_string(getpid()) + ".py");
  { std::ofstream(script) << kScript; }
  const std::string command = "timeout " + std::to_string(timeout_seconds) + " python3 " + script.string() + " '" + task.path + "' '" +
                              ids + "' 2>/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  std::string output;
  if (pipe) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
    const int status = ::pclose(pipe);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 124) output.clear();
  }
  std::error_code ec;
  fs::remove(script, ec);
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(output.substr(0, output.find('\n')));
  } catch (const std::exception&) {
    result.skipped_because = output.empty() ? "python3 did not run the dry run (missing, or it timed out after " +
                                                  std::to_string(timeout_seconds) + " s)"
                                            : "the dry run printed no result";
    return result;
  }
  if (doc.contains("skipped")) {
    result.skipped_because = doc["skipped"];
    return result;
  }
  if (doc.contains("error"))
    throw Error(ErrorCode::kBadInput, "the task's modules do not import: " + doc.value("detail", std::string()), task.reference);
  result.ran = true;
  result.device = doc.value("device", nlohmann::json()).is_string() ? doc["device"].get<std::string>() : "";
  for (auto& shape : task.shapes) {
    const auto& s = doc["shapes"][shape.id];
    if (s.contains("error")) {
      const std::string file = s.value("stage", "reference.py") == "input.py" ? task.factory : task.reference;
      throw Error(ErrorCode::kBadInput, "shape \"" + shape.id + "\": " + s["error"].get<std::string>(), file, "/" + shape.id);
    }
    auto read = [](const nlohmann::json& list, std::vector<TensorSpec>& into) {
      for (const auto& t : list) {
        TensorSpec spec;
        spec.name = t["name"];
        for (const auto& d : t["shape"]) spec.shape.push_back(d.get<long long>());
        spec.dtype = t["dtype"];
        spec.updated = t.value("updated", false);
        if (t.contains("alias_of")) spec.alias_of = t["alias_of"];
        into.push_back(std::move(spec));
      }
    };
    read(s["inputs"], shape.inputs);
    read(s["outputs"], shape.outputs);
  }
  return result;
}

}  // namespace kwiki::detail
