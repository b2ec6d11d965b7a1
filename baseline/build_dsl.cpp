// kwiki baseline's build stage for a DSL V0 (CuteDSL, FlyDSL): kernel.py compiled for the plan's
// target by the DSL itself, without a device, through `python kernel.py --compile-check`.
#include <cstdlib>

#include "stages.hpp"
#include "target.hpp"
#include "trace.hpp"

namespace kwiki::detail {

void build_dsl(Context& c) {
  const fs::path out = c.ws / "build" / "dsl";
  fs::create_directories(out);
  const char* env = std::getenv("KWIKI_DSL_PYTHON");
  const std::string python = env && *env ? env : find_python();
  const bool cute = c.header.framework == "cutedsl";
  const std::string module = cute ? "cutlass.cute" : "flydsl";
  const std::string language = find_framework(c.header.framework)->language;
  c.evidence["target"] = c.header.target;
  c.evidence["framework"] = c.header.framework;
  if (!run_tool({python, "-c", "import torch, " + module}, 300).ok()) {
    c.skip_compile = language + " is not importable by " + python + " (scripts/dev.sh dsl installs it; set KWIKI_DSL_PYTHON)";
    c.evidence["compiled"] = false;
    c.evidence["not_compiled_because"] = c.skip_compile;
    c.result.notes.push_back(c.skip_compile);
    return;
  }
  ProcessSpec spec;
  spec.argv = {python, "kernel.py", "--compile-check", out.string()};
  spec.cwd = c.ws.string();
  spec.timeout_seconds = 600;
  // CuteDSL reads its target and what to keep when it starts; FlyDSL's check sets its own.
  if (cute) spec.set_env = {{"CUTE_DSL_ARCH", c.header.target}, {"CUTE_DSL_KEEP", "ptx,cubin"}, {"CUTE_DSL_DUMP_DIR", out.string()}};
  const ProcessResult r = run_process(spec);
  const std::string log = r.started ? r.out : r.error;
  write_text(c.profiles / "dsl_compile.log", log);
  const auto at = log.rfind("KWIKI_DSL_CHECK=");
  const nlohmann::ordered_json check =
      at == std::string::npos ? nlohmann::ordered_json() : nlohmann::ordered_json::parse(log.substr(at + 16, log.find('\n', at) - at - 16), nullptr, false);
  if (!r.ok() || !check.is_object()) {
    c.result.status = "COMPILE_FAIL";
    c.result.exit_code = 4;
    c.result.notes.push_back(language + " could not compile kernel.py for " + c.header.target + ": see profiles/v0/dsl_compile.log");
    c.evidence["compiled"] = false;
    return;
  }
  c.evidence["compiled"] = true;
  c.evidence["dsl_check"] = check;
  c.result.compiled = true;
  c.result.notes.push_back(language + " compiled kernel.py for " + c.header.target + " on this machine (no device needed); its correctness and "
                           "speed are checked only where a GPU of the plan runs it");
}

}  // namespace kwiki::detail
