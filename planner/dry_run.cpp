// The dry run: executes a task's PyTorch reference once per shape to learn its true tensors.
#include "dry_run.hpp"

#include <cstdlib>
#include <filesystem>

#include "kwiki/error.hpp"
#include "subprocess.hpp"

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
task_dir, shape_ids = sys.argv[1], sys.argv[2:]
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

std::string python_interpreter() {
  const char* chosen = std::getenv("KWIKI_PYTHON");
  return chosen && *chosen ? chosen : "python3";
}

DryRun dry_run(Task& task, int timeout_seconds) {
  DryRun result;
  if (task.form != "benchmark") {
    result.skipped_because = "a task.json task has no input factory to run";
    return result;
  }
  // The script travels as one argument (python -c), the task folder and each shape id as their
  // own: no shell, no temporary file, nothing a task's names can break out of.
  ProcessSpec spec;
  spec.argv = {python_interpreter(), "-c", kScript, task.path};
  for (const auto& s : task.shapes) spec.argv.push_back(s.id);
  spec.environment = scrubbed_environment();
  spec.set_env = {{"PYTHONDONTWRITEBYTECODE", "1"}};
  spec.timeout_seconds = timeout_seconds;
  spec.merge_stderr = false;  // the reference's own warnings stay out of the one JSON line
  const ProcessResult run = run_process(spec);
  if (!run.started) {
    result.skipped_because = run.error + " (set KWIKI_PYTHON to an interpreter with torch)";
    return result;
  }
  if (run.timed_out) {
    result.skipped_because = "the dry run did not finish within " + std::to_string(timeout_seconds) +
                             " s (reference.py or input.py still running; its process group was killed)";
    return result;
  }
  const std::string& output = run.out;
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(output.substr(0, output.find('\n')));
  } catch (const std::exception&) {
    result.skipped_because = output.empty() ? spec.argv.front() + " printed nothing (exit " + std::to_string(run.exit_code) + ")"
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
